-- scrapy-simhash verified Redis index: one call's writes to both stores in ONE atomic script.
--
-- redis_verified.py assembles the script as
--   local function SIMHASH_STORE(KEYS, ARGV) <redis_store.lua> end
--   local function SKETCH_STORE(KEYS, ARGV) <redis_minhash.lua> end
--   <this file>
-- so each store's script runs unchanged over its own keys and arguments, and Redis runs the whole
-- call atomically: both stores' writes land or neither does (AOF and replicas get them as one unit).
--
-- KEYS: 1 .. ARGV[1] the sketch store's keys (its KEYS), the rest the simhash store's (its KEYS).
-- ARGV: 1 the number of the sketch store's keys, then operations, each: name, count n, n arguments:
--   'm'  a call of the sketch store's script (n arguments: its ARGV); replies as that script does
--   's'  a call of the simhash store's script (its ARGV)
--   'h'  1 if the sketch store holds the key (1 argument), else 0
--   'b'  the simhash store's rows, read now, of the candidates the last 'm' call returned (4 arguments:
--        the simhash store's k, retention ms, tables spec and epoch): flat {seq8, 0, record, ...}
--   'k'  the keys of the pages the last 's' call returned (a query's or check_and_add's matches) that
--        the sketch store holds (no arguments): a simhash match with a sketch is judged by sketches,
--        so the client needs to know without another round trip
--   'B'  as 'b' for a batch: the rows of the candidates of every query of the last 'm' call (a 'Q'
--        call: one list per query), each key once, flat; after 'b''s 4 arguments, each query's position
--        in the last 's' call (a 'Q' call): a candidate that query's simhash matches hold is not read
--   'K'  as 'k' for a batch: for each query of the last 's' call (a 'Q' call), its list of keys;
--        arguments: for each of those queries, its position in the last 'm' call (a 'Q' call) or 0: a
--        key among that query's sketch candidates has a sketch, and is not looked up
--   'w'  add a sketch to a stored page that has none (add_sketch): 1 argument, the seq8 the simhash
--        store held for the key when the client read it, then the sketch store's 'a' arguments; added
--        only when the key still holds that seq8 and no sketch, so that an older visit's sketch never
--        lands on a newer visit's page; replies 1 if added, else 0
--   'e'  (retention) the sketch store's 'r' arguments without the key: from now on, every page the
--        simhash store forgets as expired (its trim, run by its writes and by 't') loses its sketch in
--        the same call, so that no sketch outlives its page; replies 0
-- Returns a list: one reply per operation. Both stores' epochs are checked before any operation
-- runs, so a lost namespace fails the call with nothing written (as each script alone does).

local NK = tonumber(ARGV[1])
local SK, HK = {}, {}
for i = 1, #KEYS do
  if i <= NK then
    SK[#SK + 1] = KEYS[i]
  else
    HK[#HK + 1] = KEYS[i]
  end
end

local ops = {}
local at = 2
while at <= #ARGV do
  local n = tonumber(ARGV[at + 1])
  local args = {}
  for j = 1, n do
    args[j] = ARGV[at + 1 + j]
  end
  ops[#ops + 1] = {ARGV[at], args}
  at = at + 2 + n
end

local function lost(config, epoch, what)
  local stored = redis.call('HGET', config, 'epoch')
  if stored == epoch then
    return nil
  end
  if stored then
    return redis.error_reply('SIMHASH_LOST the ' .. what .. ' namespace was deleted and created again')
  end
  return redis.error_reply('SIMHASH_LOST the ' .. what .. ' namespace is gone')
end

local checked = {} -- each store's epoch once per call (a batch of lookups names it once per page)
local function lost_once(config, epoch, what)
  if checked[config] == epoch then
    return nil
  end
  checked[config] = epoch
  return lost(config, epoch, what)
end

for _, op in ipairs(ops) do
  local name, args = op[1], op[2]
  local err
  if name == 'm' then
    err = lost_once(SK[1], args[2], 'sketch store')
  elseif name == 's' then
    err = lost_once(HK[1], args[5], 'simhash store')
  elseif name == 'b' or name == 'B' then
    err = lost_once(HK[1], args[4], 'simhash store')
  elseif name == 'e' then
    err = lost_once(SK[1], args[2], 'sketch store')
  elseif name == 'w' then
    err = lost_once(SK[1], args[3], 'sketch store')
  end
  if err then
    return err
  end
end

-- The key of a simhash store record (see redis_store.lua) of T tables.
local function simhash_record_key(rec, T)
  local off = 17 + 8 * T
  local b1, b2, b3, b4 = string.byte(rec, off, off + 3)
  local len = ((b1 * 256 + b2) * 256 + b3) * 256 + b4
  return string.sub(rec, off + 4, off + 3 + len)
end

-- The key of a sketch store record (see redis_minhash.lua) of sketch_bytes sb and bands b.
local function sketch_record_key(rec, sb, b)
  local off = 9 + sb + 8 * b
  local b1, b2, b3, b4 = string.byte(rec, off, off + 3)
  local len = ((b1 * 256 + b2) * 256 + b3) * 256 + b4
  return string.sub(rec, off + 4, off + 3 + len)
end

-- The simhash store's row of key: its 'g' call, or (no retention, so nothing can be expired) the two
-- reads that call makes, without running the whole store script once per candidate.
local function row_of(key, head)
  if tonumber(head[2]) > 0 then
    return SIMHASH_STORE(HK, {'g', head[1], head[2], head[3], head[4], key})
  end
  local seq8 = redis.call('HGET', HK[3], key)
  local rec = seq8 and redis.call('HGET', HK[4], seq8)
  if not rec then
    return {}
  end
  return {seq8, 0, rec}
end

local out, last, last_s, on_expire = {}, nil, nil, nil
for _, op in ipairs(ops) do
  local name, args = op[1], op[2]
  local reply
  if name == 'm' then
    reply = SKETCH_STORE(SK, args)
    last = {reply, args}
  elseif name == 'e' then
    on_expire = function(key)
      local call = {}
      for j = 1, #args do
        call[j] = args[j]
      end
      call[#call + 1] = key
      local removed = SKETCH_STORE(SK, call)
      if type(removed) == 'table' and removed.err then
        return removed
      end
      return nil
    end
    reply = 0
  elseif name == 's' then
    reply = SIMHASH_STORE(HK, args, on_expire)
    last_s = reply
  elseif name == 'w' then
    local key = args[#args - 1]
    reply = 0
    if redis.call('HGET', HK[3], key) == args[1] and redis.call('HEXISTS', SK[3], key) == 0 then
      local call = {}
      for j = 2, #args do
        call[#call + 1] = args[j]
      end
      local added = SKETCH_STORE(SK, call)
      if type(added) == 'table' and added.err then
        return added
      end
      reply = 1
    end
  elseif name == 'B' then
    reply = {}
    if last and type(last[1]) == 'table' then
      local sb, b, seen = tonumber(last[2][4]), tonumber(last[2][5]), {}
      for qi, one in ipairs(last[1]) do
        local held = {}
        local at = tonumber(args[4 + qi])
        if at and type(last_s) == 'table' and type(last_s[at]) == 'table' then
          for j = 3, #last_s[at], 3 do
            held[simhash_record_key(last_s[at][j], #HK - 5)] = true
          end
        end
        for j = 2, #one, 2 do
          local key = sketch_record_key(one[j], sb, b)
          if not seen[key] and not held[key] then
            seen[key] = true
            for _, v in ipairs(row_of(key, args)) do
              reply[#reply + 1] = v
            end
          end
        end
      end
    end
  elseif name == 'k' or name == 'K' then
    local function flags(found, sketched)
      local out = {}
      for j = 3, #found, 3 do
        local key = simhash_record_key(found[j], #HK - 5)
        if sketched[key] or redis.call('HEXISTS', SK[3], key) == 1 then
          out[#out + 1] = key
        end
      end
      return out
    end
    reply = {}
    if type(last_s) == 'table' and name == 'k' then
      reply = flags(last_s, {})
    elseif type(last_s) == 'table' then
      for p, one in ipairs(last_s) do
        local sketched, at = {}, tonumber(args[p])
        if at and at > 0 and last and type(last[1]) == 'table' and type(last[1][at]) == 'table' then
          local sb, b = tonumber(last[2][4]), tonumber(last[2][5])
          for j = 2, #last[1][at], 2 do
            sketched[sketch_record_key(last[1][at][j], sb, b)] = true
          end
        end
        reply[#reply + 1] = flags(one, sketched)
      end
    end
  elseif name == 'h' then
    reply = redis.call('HEXISTS', SK[3], args[1])
  elseif name == 'b' then
    reply = {}
    if last and type(last[1]) == 'table' then
      local sb, b = tonumber(last[2][4]), tonumber(last[2][5])
      for j = 2, #last[1], 2 do
        local key = sketch_record_key(last[1][j], sb, b)
        local row = row_of(key, args)
        for _, v in ipairs(row) do
          reply[#reply + 1] = v
        end
      end
    end
  else
    return redis.error_reply('scrapy-simhash: unknown verified operation ' .. tostring(name))
  end
  if type(reply) == 'table' and reply.err then
    return reply
  end
  out[#out + 1] = reply
end
return out
