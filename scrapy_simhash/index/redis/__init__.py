"""The Redis stores: the simhash, MinHash and verified indexes as Lua scripts (the .lua files here)
over one shared connection with retries. Same answers as the embedded stores."""
