-- scrapy-simhash Redis index: every operation in one atomic script (one round trip).
--
-- KEYS (all share the hash tag {prefix}, so Redis Cluster keeps them in one slot):
--   1 config hash     2 seq counter     3 keys hash (key -> seq8)
--   4 docs hash (seq8 -> record)        5 time zset (seq8 scored by insertion ms; retention only)
--   6 .. 5+T  Manku tables; an entry is the permuted fingerprint (8 bytes, big-endian) .. seq8. Either
--             sorted sets, every score 0, so that ZRANGEBYLEX over a key prefix is an exact bucket lookup;
--             or hashes whose field is the table key and whose value is the bucket's entries, concatenated.
-- ARGV: 1 mode, 2 k, 3 retention in ms (0: keep forever), 4 tables: 'z' (sorted sets) or 'h' (hashes)
--       followed by one byte per table, its key length in bits; 5 the namespace's epoch (see below);
--       then by mode:
--       'q' query, 'c' check_and_add, 'a' add: 6 key, 7 record, 8 probe
--       'Q' many queries: 6.. probes;  'A' many adds: 6.. key, record pairs
--       'g' get, 'r' remove: 6 key;  'n' count;  'e' export: 6 first seq, 7 count;  't' trim: 6 limit
--       'i' create/read config: 5 a new epoch, 6.. field, value pairs;  'x' delete the namespace
--       'o' note: 6 config field, 7 value, 8 the value it may replace ('' : none); returns the field's value
-- epoch: a random id stored in the config when the namespace is created. Every other call names the
-- epoch its client opened; when the config is gone (Redis restarted empty, flushed, evicted) or holds
-- another epoch (deleted and created again), the call changes nothing and fails with SIMHASH_LOST, so a
-- client never silently re-creates an index that lost its data.
-- probe: per table 24 bytes = permuted query, lowest and highest permuted value of its bucket.
-- record = fingerprint (8) .. request id (8) .. T permuted fingerprints (8 each) .. key length (4) .. key .. meta
-- Lua numbers are doubles: 64-bit values are only ever handled as 8-byte strings.

local mode = ARGV[1]
local k = tonumber(ARGV[2])
local retention = tonumber(ARGV[3])
local HASH = string.sub(ARGV[4], 1, 1) == 'h'
local T = #KEYS - 5
local CONFIG, SEQ, KEYMAP, DOCS, TIMES = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]

local band, bxor, rshift = bit.band, bit.bxor, bit.rshift
local ON_EXPIRE = nil -- redis_verified.py's assembly sets it: a function of each key trim() forgets

if mode ~= 'i' and mode ~= 'x' then
  local epoch = redis.call('HGET', CONFIG, 'epoch')
  if epoch ~= ARGV[5] then
    if epoch then
      return redis.error_reply('SIMHASH_LOST the namespace was deleted and created again')
    end
    return redis.error_reply('SIMHASH_LOST the namespace is gone')
  end
end

-- Set bits of a 32-bit word (SWAR; no table to rebuild on every call).
local function popcount32(x)
  x = x - band(rshift(x, 1), 0x55555555)
  x = band(x, 0x33333333) + band(rshift(x, 2), 0x33333333)
  x = band(x + rshift(x, 4), 0x0F0F0F0F)
  x = x + rshift(x, 8)
  x = x + rshift(x, 16)
  return band(x, 0x3F)
end

local now_ms, cutoff
if retention > 0 then
  local t = redis.call('TIME')
  now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  cutoff = now_ms - retention
end

local function be8(n)
  local b = {}
  for i = 8, 1, -1 do
    b[i] = n % 256
    n = (n - b[i]) / 256
  end
  return string.char(b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8])
end

-- Numeric value of an 8-byte big-endian counter (exact below 2^53; string comparison would follow the locale).
local function num8(s)
  local n = 0
  for i = 1, 8 do
    n = n * 256 + string.byte(s, i)
  end
  return n
end

local function record_key(rec)
  local off = 17 + 8 * T
  local b1, b2, b3, b4 = string.byte(rec, off, off + 3)
  local len = ((b1 * 256 + b2) * 256 + b3) * 256 + b4
  return string.sub(rec, off + 4, off + 3 + len)
end

local function expired(seq8)
  if retention <= 0 then
    return false
  end
  local score = redis.call('ZSCORE', TIMES, seq8)
  return score ~= false and tonumber(score) < cutoff
end

-- The hash field of table i holding the permuted fingerprint p8: its leading key bits, zero-padded.
local function field(i, p8)
  local bits = string.byte(ARGV[4], 1 + i)
  local nbytes = math.ceil(bits / 8)
  local f = string.sub(p8, 1, nbytes)
  local spare = nbytes * 8 - bits
  if spare > 0 then
    local last = string.byte(f, nbytes)
    f = string.sub(f, 1, nbytes - 1) .. string.char(last - last % (2 ^ spare))
  end
  return f
end

local function table_add(i, p8, seq8)
  if HASH then
    local f = field(i, p8)
    local bucket = redis.call('HGET', KEYS[5 + i], f)
    redis.call('HSET', KEYS[5 + i], f, (bucket or '') .. p8 .. seq8)
  else
    redis.call('ZADD', KEYS[5 + i], 0, p8 .. seq8)
  end
end

local function table_remove(i, p8, seq8)
  if not HASH then
    redis.call('ZREM', KEYS[5 + i], p8 .. seq8)
    return
  end
  local f = field(i, p8)
  local bucket = redis.call('HGET', KEYS[5 + i], f)
  if not bucket then
    return
  end
  local entry, from = p8 .. seq8, 1
  while true do
    local at = string.find(bucket, entry, from, true)
    if not at then
      return
    end
    if (at - 1) % 16 == 0 then -- a whole entry, not bytes straddling two
      local rest = string.sub(bucket, 1, at - 1) .. string.sub(bucket, at + 16)
      if rest == '' then
        redis.call('HDEL', KEYS[5 + i], f)
      else
        redis.call('HSET', KEYS[5 + i], f, rest)
      end
      return
    end
    from = at + 1
  end
end

-- Remove one stored document (its table members, record, age entry, and its key if still its own).
local function drop(seq8)
  local rec = redis.call('HGET', DOCS, seq8)
  if not rec then
    return false
  end
  for i = 1, T do
    local off = 17 + 8 * (i - 1)
    table_remove(i, string.sub(rec, off, off + 7), seq8)
  end
  redis.call('HDEL', DOCS, seq8)
  redis.call('ZREM', TIMES, seq8)
  local key = record_key(rec)
  if redis.call('HGET', KEYMAP, key) == seq8 then
    redis.call('HDEL', KEYMAP, key)
  end
  return true
end

-- Forget documents past the retention window, a bounded number per call (amortised over writes).
local function trim(limit)
  if retention <= 0 then
    return 0
  end
  local old = redis.call('ZRANGEBYSCORE', TIMES, '-inf', '(' .. cutoff, 'LIMIT', 0, limit)
  for _, seq8 in ipairs(old) do
    local key
    if ON_EXPIRE then -- the page's key, when this document is still the key's own
      local rec = redis.call('HGET', DOCS, seq8)
      key = rec and record_key(rec)
      if key and redis.call('HGET', KEYMAP, key) ~= seq8 then
        key = nil
      end
    end
    drop(seq8)
    if key then
      local err = ON_EXPIRE(key)
      if err then
        return err
      end
    end
  end
  return #old
end

local FF8 = string.rep('\255', 8)

-- Every stored document within k of the probe, as a flat list {seq8, distance, record, ...}.
-- below: when given, only documents with a smaller seq (older): used to replay a retried call.
local function find(probe, below)
  local seen, out = {}, {}
  local qhi, qlo
  -- the entry at byte offset o of s: kept when within k (distance first: most candidates are rejected
  -- without creating a string or a table entry)
  local function consider(s, o)
    local m1, m2, m3, m4, m5, m6, m7, m8 = string.byte(s, o + 1, o + 8)
    local d = popcount32(bxor(qhi, ((m1 * 256 + m2) * 256 + m3) * 256 + m4))
    if d > k then
      return
    end
    d = d + popcount32(bxor(qlo, ((m5 * 256 + m6) * 256 + m7) * 256 + m8))
    if d > k then
      return
    end
    local seq8 = string.sub(s, o + 9, o + 16)
    if seen[seq8] then
      return
    end
    seen[seq8] = true
    if (below == nil or num8(seq8) < below) and not expired(seq8) then
      local rec = redis.call('HGET', DOCS, seq8)
      if rec then
        out[#out + 1] = seq8
        out[#out + 1] = d
        out[#out + 1] = rec
      end
    end
  end
  for i = 1, T do
    local off = 24 * (i - 1)
    local q1, q2, q3, q4, q5, q6, q7, q8 = string.byte(probe, off + 1, off + 8)
    qhi = ((q1 * 256 + q2) * 256 + q3) * 256 + q4
    qlo = ((q5 * 256 + q6) * 256 + q7) * 256 + q8
    if HASH then
      local bucket = redis.call('HGET', KEYS[5 + i], field(i, string.sub(probe, off + 1, off + 8)))
      if bucket then
        for o = 0, #bucket - 16, 16 do
          consider(bucket, o)
        end
      end
    else
      -- entries are 16 bytes, so 8 bytes of 0xFF after the bucket's highest value bound it inclusively
      local low, high = string.sub(probe, off + 9, off + 16), string.sub(probe, off + 17, off + 24)
      for _, m in ipairs(redis.call('ZRANGEBYLEX', KEYS[5 + i], '[' .. low, '[' .. high .. FF8)) do
        consider(m, 0)
      end
    end
  end
  return out
end

local function insert(key, rec)
  local seq8 = be8(redis.call('INCR', SEQ))
  for i = 1, T do
    local off = 17 + 8 * (i - 1)
    table_add(i, string.sub(rec, off, off + 7), seq8)
  end
  redis.call('HSET', DOCS, seq8, rec)
  redis.call('HSET', KEYMAP, key, seq8)
  if retention > 0 then
    redis.call('ZADD', TIMES, now_ms, seq8)
  end
end

-- add ('a') or check_and_add ('c') of one record; returns the matches before the insert ('c').
local function write(what, key, rec, probe)
  local old = redis.call('HGET', KEYMAP, key)
  if old then
    local old_rec = redis.call('HGET', DOCS, old)
    if old_rec and string.sub(old_rec, 9, 16) == string.sub(rec, 9, 16) then
      -- Same request id: this call already ran and its reply was lost with the connection.
      -- Answer as the first run did and do not insert twice.
      if what == 'c' then
        return find(probe, num8(old))
      end
      return {}
    end
  end
  local matches = {}
  if what == 'c' then
    matches = find(probe, nil)
  end
  if old then
    drop(old)
  end
  insert(key, rec)
  return matches
end

if mode == 'q' then
  return find(ARGV[8], nil)
end

if mode == 'Q' then
  -- Many lookups in one call: ARGV[6..] are probes; one flat list per probe.
  local out = {}
  for i = 6, #ARGV do
    out[#out + 1] = find(ARGV[i], nil)
  end
  return out
end

if mode == 'c' or mode == 'a' then
  trim(64)
  return write(mode, ARGV[6], ARGV[7], ARGV[8])
end

if mode == 'A' then
  -- Many inserts in one call: ARGV[6..] are key, record pairs, applied in order.
  trim(64)
  for i = 6, #ARGV, 2 do
    write('a', ARGV[i], ARGV[i + 1], nil)
  end
  return (#ARGV - 5) / 2
end

if mode == 'g' then
  local seq8 = redis.call('HGET', KEYMAP, ARGV[6])
  if not seq8 or expired(seq8) then
    return {}
  end
  local rec = redis.call('HGET', DOCS, seq8)
  if not rec then
    return {}
  end
  return {seq8, 0, rec}
end

if mode == 'r' then
  local seq8 = redis.call('HGET', KEYMAP, ARGV[6])
  if not seq8 then
    return 0
  end
  local was_live = not expired(seq8)
  drop(seq8)
  redis.call('HDEL', KEYMAP, ARGV[6])
  if was_live then
    return 1
  end
  return 0
end

if mode == 'n' then
  local n = redis.call('HLEN', KEYMAP)
  if retention > 0 then
    n = n - redis.call('ZCOUNT', TIMES, '-inf', '(' .. cutoff)
  end
  return n
end

if mode == 'e' then
  -- Export: the live records with seq in [ARGV[6], ARGV[6] + ARGV[7]), oldest first.
  local first, count = tonumber(ARGV[6]), tonumber(ARGV[7])
  local out = {}
  for s = first, first + count - 1 do
    local seq8 = be8(s)
    local rec = redis.call('HGET', DOCS, seq8)
    if rec and not expired(seq8) then
      out[#out + 1] = seq8
      out[#out + 1] = 0
      out[#out + 1] = rec
    end
  end
  return out
end

if mode == 't' then
  return trim(tonumber(ARGV[6]))
end

if mode == 'i' then
  -- Create the config on first open (field/value pairs from ARGV[6], the epoch ARGV[5]); every opener
  -- reads it back. A namespace made before epochs existed gets one now.
  if redis.call('EXISTS', CONFIG) == 0 then
    for i = 6, #ARGV, 2 do
      redis.call('HSET', CONFIG, ARGV[i], ARGV[i + 1])
    end
  end
  redis.call('HSETNX', CONFIG, 'epoch', ARGV[5])
  return redis.call('HGETALL', CONFIG)
end

if mode == 'o' then
  -- Compare-and-set of one config field: two crawlers opening the index at once agree on one value.
  local current = redis.call('HGET', CONFIG, ARGV[6])
  if current and current ~= ARGV[8] then
    return current
  end
  redis.call('HSET', CONFIG, ARGV[6], ARGV[7])
  return ARGV[7]
end

if mode == 'x' then
  -- Delete the whole namespace.
  local n = 0
  for i = 1, #KEYS do
    n = n + redis.call('UNLINK', KEYS[i]) -- freed in the background: no stall on a big index
  end
  return n
end

return redis.error_reply('scrapy-simhash: unknown script mode ' .. tostring(mode))
