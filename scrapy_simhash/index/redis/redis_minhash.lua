-- scrapy-simhash Redis MinHash-LSH index: every operation in one atomic script (one round trip).
--
-- KEYS: 1 config hash (simhash:{prefix}:config, shared with the simhash index so that one prefix
--       holds one kind of index); 2 seq counter; 3 keys hash (key -> seq); 4 docs hash (seq -> record).
--       Band buckets ('s') are sets of seqs named <base>b:<band>:<band key, 16 hex digits>, or ('h')
--       one hash per band, <base>h:<band>, whose field is the band key (8 bytes) and whose value is
--       the bucket's seqs, 8 bytes each (big-endian). Names are built here from the band keys the
--       client computed (Lua numbers are doubles: no 64-bit hashing here). Every name carries the
--       hash tag {prefix}: one Redis Cluster slot.
-- ARGV: 1 mode, 2 the namespace's epoch, 3 base (simhash:{prefix}:m:<epoch>:), 4 sketch bytes, 5 bands,
--       6 bucket kind ('s' sets, 'h' hashes), then by mode:
--       'q' query: 7 band keys (8 bytes each, big-endian);  'Q' many queries: 7.. band keys per query
--       'c' check_and_add, 'a' add: 7 key, 8 record;  'A' many adds: 7.. key, record pairs
--       'g' get, 'r' remove: 7 key;  'G' many gets: 7.. keys (one {seq, record} or {} per key);  'n' count;  'e' export keys: 7 first seq, 8 count
--       'i' create/read the config: 2 a new epoch, 7.. field, value pairs;  'x' delete the config
-- record = request id (8) .. sketch (sketch bytes: num_values values of value_bits / 8 bytes each,
--          little-endian) .. band keys (8 * bands)
--          .. key length (4, big-endian) .. key .. meta JSON (may be empty)
-- epoch: as in redis_store.lua; a config that is gone or holds another epoch fails every call with
-- SIMHASH_LOST before anything is touched, so a Redis that restarted empty is never silently refilled.

local mode = ARGV[1]
local CONFIG, SEQ, KEYMAP, DOCS = KEYS[1], KEYS[2], KEYS[3], KEYS[4]

if mode == 'i' then
  if redis.call('EXISTS', CONFIG) == 0 then
    for i = 7, #ARGV, 2 do
      redis.call('HSET', CONFIG, ARGV[i], ARGV[i + 1])
    end
    redis.call('HSET', CONFIG, 'epoch', ARGV[2])
  end
  return redis.call('HGETALL', CONFIG)
end

if mode == 'x' then
  return redis.call('DEL', CONFIG)
end

local epoch = redis.call('HGET', CONFIG, 'epoch')
if epoch ~= ARGV[2] then
  if epoch then
    return redis.error_reply('SIMHASH_LOST the namespace was deleted and created again')
  end
  return redis.error_reply('SIMHASH_LOST the namespace is gone')
end

local BASE = ARGV[3]
local SKETCH_BYTES = tonumber(ARGV[4])
local B = tonumber(ARGV[5])
local HASH = ARGV[6] == 'h'
local BANDS_AT = 9 + SKETCH_BYTES -- first byte of the band keys in a record
local KEY_AT = BANDS_AT + 8 * B -- first byte of the key length

local function band_name(t, s, at)
  return BASE .. 'b:' .. t .. ':' .. string.format('%02x%02x%02x%02x%02x%02x%02x%02x', string.byte(s, at, at + 7))
end

local function band_names(s, at)
  local names = {}
  for t = 1, B do
    names[t] = band_name(t - 1, s, at + 8 * (t - 1))
  end
  return names
end

local function record_key(rec)
  local b1, b2, b3, b4 = string.byte(rec, KEY_AT, KEY_AT + 3)
  local len = ((b1 * 256 + b2) * 256 + b3) * 256 + b4
  return string.sub(rec, KEY_AT + 4, KEY_AT + 3 + len)
end

local function be8(n)
  local b = {}
  for i = 8, 1, -1 do
    b[i] = n % 256
    n = (n - b[i]) / 256
  end
  return string.char(b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8])
end

local function num8(s, at)
  local n = 0
  for i = at, at + 7 do
    n = n * 256 + string.byte(s, i)
  end
  return n
end

-- The seqs (decimal strings) in the buckets of the band keys of s (from byte at).
local function members(s, at)
  if not HASH then
    return redis.call('SUNION', unpack(band_names(s, at)))
  end
  local seen, out = {}, {}
  for t = 1, B do
    local o = at + 8 * (t - 1)
    local bucket = redis.call('HGET', BASE .. 'h:' .. (t - 1), string.sub(s, o, o + 7))
    if bucket then
      for p = 1, #bucket - 7, 8 do
        local e = string.sub(bucket, p, p + 7)
        if not seen[e] then
          seen[e] = true
          out[#out + 1] = string.format('%.0f', num8(e, 1))
        end
      end
    end
  end
  return out
end

local function join(rec, seq)
  if not HASH then
    for _, name in ipairs(band_names(rec, BANDS_AT)) do
      redis.call('SADD', name, seq)
    end
    return
  end
  local e = be8(tonumber(seq))
  for t = 1, B do
    local o = BANDS_AT + 8 * (t - 1)
    local name, f = BASE .. 'h:' .. (t - 1), string.sub(rec, o, o + 7)
    redis.call('HSET', name, f, (redis.call('HGET', name, f) or '') .. e)
  end
end

local function leave(rec, seq)
  if not HASH then
    for _, name in ipairs(band_names(rec, BANDS_AT)) do
      redis.call('SREM', name, seq)
    end
    return
  end
  local e = be8(tonumber(seq))
  for t = 1, B do
    local o = BANDS_AT + 8 * (t - 1)
    local name, f = BASE .. 'h:' .. (t - 1), string.sub(rec, o, o + 7)
    local bucket = redis.call('HGET', name, f)
    if bucket then
      local from = 1
      while true do
        local p = string.find(bucket, e, from, true)
        if not p then
          break
        end
        if (p - 1) % 8 == 0 then -- a whole entry, not bytes straddling two
          local rest = string.sub(bucket, 1, p - 1) .. string.sub(bucket, p + 8)
          if rest == '' then
            redis.call('HDEL', name, f)
          else
            redis.call('HSET', name, f, rest)
          end
          break
        end
        from = p + 1
      end
    end
  end
end

-- Every stored document sharing a band bucket with the probe: a flat list {seq, record, ...}.
-- below: when given, only older documents (smaller seq): the replay of a retried call.
local function find(probe, at, below)
  local out = {}
  for _, s in ipairs(members(probe, at)) do
    if below == nil or tonumber(s) < below then
      local rec = redis.call('HGET', DOCS, s)
      if rec then
        out[#out + 1] = s
        out[#out + 1] = rec
      end
    end
  end
  return out
end

-- Remove one stored document: its band memberships, its record, and its key if still its own.
local function drop(seq)
  local rec = redis.call('HGET', DOCS, seq)
  if not rec then
    return false
  end
  leave(rec, seq)
  redis.call('HDEL', DOCS, seq)
  local key = record_key(rec)
  if redis.call('HGET', KEYMAP, key) == seq then
    redis.call('HDEL', KEYMAP, key)
  end
  return true
end

-- add ('a') or check_and_add ('c'); returns the matches before the insert ('c').
local function write(what, key, rec)
  local old = redis.call('HGET', KEYMAP, key)
  if old then
    local old_rec = redis.call('HGET', DOCS, old)
    if old_rec and string.sub(old_rec, 1, 8) == string.sub(rec, 1, 8) then
      -- Same request id: this call already ran and its reply was lost with the connection.
      if what == 'c' then
        return find(rec, BANDS_AT, tonumber(old))
      end
      return {}
    end
  end
  local matches = {}
  if what == 'c' then
    matches = find(rec, BANDS_AT, nil)
  end
  if old then
    drop(old)
  end
  local seq = tostring(redis.call('INCR', SEQ))
  join(rec, seq)
  redis.call('HSET', DOCS, seq, rec)
  redis.call('HSET', KEYMAP, key, seq)
  return matches
end

if mode == 'q' then
  return find(ARGV[7], 1, nil)
end

if mode == 'Q' then
  local out = {}
  for i = 7, #ARGV do
    out[#out + 1] = find(ARGV[i], 1, nil)
  end
  return out
end

if mode == 'c' or mode == 'a' then
  return write(mode, ARGV[7], ARGV[8])
end

if mode == 'A' then
  for i = 7, #ARGV, 2 do
    write('a', ARGV[i], ARGV[i + 1])
  end
  return (#ARGV - 6) / 2
end

if mode == 'g' then
  local seq = redis.call('HGET', KEYMAP, ARGV[7])
  if not seq then
    return {}
  end
  local rec = redis.call('HGET', DOCS, seq)
  if not rec then
    return {}
  end
  return {seq, rec}
end

if mode == 'G' then
  local out = {}
  for i = 7, #ARGV do
    local found = {}
    local seq = redis.call('HGET', KEYMAP, ARGV[i])
    if seq then
      local rec = redis.call('HGET', DOCS, seq)
      if rec then
        found = {seq, rec}
      end
    end
    out[#out + 1] = found
  end
  return out
end

if mode == 'r' then
  local seq = redis.call('HGET', KEYMAP, ARGV[7])
  if not seq then
    return 0
  end
  drop(seq)
  redis.call('HDEL', KEYMAP, ARGV[7])
  return 1
end

if mode == 'n' then
  return redis.call('HLEN', KEYMAP)
end

if mode == 'e' then
  -- Export: the last seq given out, then the keys of the live documents with seq in
  -- [ARGV[7], ARGV[7] + ARGV[8]), oldest first.
  local first, count = tonumber(ARGV[7]), tonumber(ARGV[8])
  local out = {redis.call('GET', SEQ) or '0'}
  for s = first, first + count - 1 do
    local rec = redis.call('HGET', DOCS, tostring(s))
    if rec then
      out[#out + 1] = record_key(rec)
    end
  end
  return out
end

return redis.error_reply('scrapy-simhash: unknown MinHash script mode ' .. tostring(mode))
