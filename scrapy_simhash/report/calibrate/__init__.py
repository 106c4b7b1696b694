"""Threshold calibration a person does in a browser: ``calibrate sample`` draws pairs across distances
(:mod:`.sample`) into a judging page (:mod:`.page`); ``calibrate score`` scores each threshold against
the judgements (:mod:`.score`)."""
