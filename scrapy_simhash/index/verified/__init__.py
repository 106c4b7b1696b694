"""The verified composition on top: a simhash store plus its sketch store, judged by one rule
(scrapy_simhash.decision); simhash mode over an index that holds sketches."""
