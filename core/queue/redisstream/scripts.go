package redisstream

import "github.com/redis/go-redis/v9"

// Every change to the queue is one Lua script, so it is atomic: no consumer
// sees a job half-moved, and a crash between two steps cannot lose a job.
//
// All scripts declare the same keys (keys.script) and start with the same
// three arguments: ARGV[1] the consumer group, ARGV[2] now as unix ms by the
// queue's clock, ARGV[3] the queue's default MaxAttempts. Script-specific
// arguments follow from ARGV[4].
//
// A job record (the JSON in the jobs hash) is decoded and re-encoded with
// cjson. Its times are unix milliseconds (13 digits, exact under cjson's
// 14-digit number format); the payload is a JSON string, so cjson never
// reformats it.

// scriptPrelude binds the keys and common arguments and defines the helpers
// the scripts share.
const scriptPrelude = `
local stream, jobs, delayed, leases, keymap, dead, seq = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local group, now, defaultMax = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

local function load(id)
  local s = redis.call('HGET', jobs, id)
  if not s then return nil end
  return cjson.decode(s)
end

local function save(r)
  local s = cjson.encode(r)
  redis.call('HSET', jobs, r.id, s)
  return s
end

-- field returns the value of name in a stream entry's flat field list.
local function field(fields, name)
  for i = 1, #fields, 2 do
    if fields[i] == name then return fields[i + 1] end
  end
  return nil
end

local function limit(r)
  if r.max > 0 then return r.max end
  return defaultMax
end

-- waiting: r exists, is not being worked on and so absorbs jobs with its key.
local function waiting(r, key)
  return r ~= nil and r.lease == '' and r.key == key
end

-- unmap stops r from absorbing jobs with its key.
local function unmap(r)
  if r.key ~= '' and redis.call('HGET', keymap, r.key) == r.id then
    redis.call('HDEL', keymap, r.key)
  end
end

-- map makes the waiting job r absorb jobs with its key, unless another
-- waiting job already does.
local function map(r)
  if r.key == '' then return end
  local cur = redis.call('HGET', keymap, r.key)
  if cur and cur ~= r.id and waiting(load(cur), r.key) then return end
  redis.call('HSET', keymap, r.key, r.id)
end

-- delay puts r (already saved or about to be) in the delayed set at due.
local function delay(r, due)
  r.due = string.format('%016d', redis.call('INCR', seq)) .. ':' .. r.id
  redis.call('ZADD', delayed, due, r.due)
end

-- settle ends r's current delivery: its entry leaves the PEL and the stream
-- (XACK then XDEL: the stream never keeps a settled entry) and its lease is
-- forgotten.
local function settle(r)
  if r.entry ~= '' then
    redis.call('XACK', stream, group, r.entry)
    redis.call('XDEL', stream, r.entry)
  end
  redis.call('ZREM', leases, r.id)
  r.entry, r.lease, r.consumer = '', '', ''
end

-- kill dead-letters r with reason.
local function kill(r, reason)
  settle(r)
  unmap(r)
  redis.call('HDEL', jobs, r.id)
  r.error, r.dead_at, r.due = reason, now, ''
  redis.call('XADD', dead, '*', 'job', cjson.encode(r))
end

-- promote moves up to n delayed jobs that are due into the stream, in due
-- order (the promoter; it runs inside Enqueue and Dequeue).
local function promote(n)
  local due = redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, n)
  for _, m in ipairs(due) do
    redis.call('ZREM', delayed, m)
    local id = string.sub(m, 18)
    if redis.call('HEXISTS', jobs, id) == 1 then
      redis.call('XADD', stream, '*', 'job', id)
    end
  end
end

local function anyDue()
  return #redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, 1) > 0
end
`

// enqueueScript adds a job or coalesces it into a waiting job with its key.
// ARGV[4] job id, ARGV[5] record JSON, ARGV[6] key, ARGV[7] due (ms),
// ARGV[8] promoter batch. Returns 1 added, 0 coalesced, -1 id taken.
var enqueueScript = redis.NewScript(scriptPrelude + `
local id, key, due, batch = ARGV[4], ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8])
if key ~= '' then
  local cur = redis.call('HGET', keymap, key)
  if cur then
    local r = load(cur)
    if waiting(r, key) then
      if due < r.run_at then
        r.run_at = due
        if r.due ~= '' and redis.call('ZSCORE', delayed, r.due) then
          redis.call('ZADD', delayed, due, r.due)
        end
        save(r)
      end
      promote(batch)
      return 0
    end
  end
end
if redis.call('HEXISTS', jobs, id) == 1 then return -1 end
-- Older due work goes first; a due job skips the delayed set only when
-- nothing due is left in it, so the stream stays in due order.
promote(batch)
if due <= now and not anyDue() then
  redis.call('HSET', jobs, id, ARGV[5])
  redis.call('XADD', stream, '*', 'job', id)
else
  local r = cjson.decode(ARGV[5])
  delay(r, due)
  save(r)
end
if key ~= '' then redis.call('HSET', keymap, key, id) end
return 1
`)

// dequeueScript delivers one job to a consumer: first a job whose lease ran
// out (XCLAIM of its PEL entry to the new consumer), then, after promoting
// due delayed jobs, the next new entry (XREADGROUP). Jobs that used up their
// deliveries are dead-lettered on the way.
// ARGV[4] consumer, ARGV[5] lease expiry (ms), ARGV[6] promoter batch.
// Returns {1, record JSON, more} (more is 1 when another job may be due: an
// expired lease was claimed, or newer entries wait) or {0, id of the
// stream's last entry or "0-0"}.
var dequeueScript = redis.NewScript(scriptPrelude + `
local consumer, expiry, batch = ARGV[4], ARGV[5], tonumber(ARGV[6])

local function deliver(r, entry, more)
  r.attempt = r.attempt + 1
  r.entry, r.consumer = entry, consumer
  r.lease = entry .. '/' .. r.attempt
  redis.call('ZADD', leases, expiry, r.id)
  unmap(r)
  return {1, save(r), more}
end

local function exhausted(r)
  local reason = 'delivery limit reached: ' .. r.attempt .. ' attempts'
  if r.error ~= '' then reason = reason .. '; last error: ' .. r.error end
  return reason
end

-- Expired (or recovered) leases.
while true do
  local ids = redis.call('ZRANGEBYSCORE', leases, '-inf', now, 'LIMIT', 0, 1)
  if #ids == 0 then break end
  local r = load(ids[1])
  if not r or r.entry == '' then
    redis.call('ZREM', leases, ids[1])
  elseif r.attempt >= limit(r) then
    kill(r, exhausted(r))
  elseif #redis.call('XCLAIM', stream, group, consumer, 0, r.entry) > 0 then
    return deliver(r, r.entry, 1)
  else
    -- The entry left the stream behind our back: queue the job afresh.
    redis.call('ZREM', leases, r.id)
    r.entry, r.lease, r.consumer = '', '', ''
    save(r)
    redis.call('XADD', stream, '*', 'job', r.id)
  end
end

promote(batch)

-- New entries.
while true do
  local res = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', 1, 'STREAMS', stream, '>')
  if not res then break end
  local e = res[1][2][1]
  local r = load(field(e[2], 'job') or '')
  if not r or (r.lease ~= '' and r.entry ~= e[1]) then
    -- No such job, or a second entry for a job delivered through another
    -- one (a duplicate): drop it. The delivery in progress owns the job; if
    -- its holder dies, the lease expiry above delivers it again.
    redis.call('XACK', stream, group, e[1])
    redis.call('XDEL', stream, e[1])
  elseif r.attempt >= limit(r) then
    r.entry = e[1]
    kill(r, exhausted(r))
  else
    -- Entries after this one were not delivered yet.
    local tip = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)
    return deliver(r, e[1], (#tip > 0 and tip[1][1] ~= e[1]) and 1 or 0)
  end
end

local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)
if #last == 0 then return {0, '0-0'} end
return {0, last[1][1]}
`)

// extendScript renews a lease. ARGV[4] job id, ARGV[5] lease token,
// ARGV[6] new expiry (ms). Returns 1, or 0 when the lease is lost.
var extendScript = redis.NewScript(scriptPrelude + `
local r = load(ARGV[4])
if not r or r.lease == '' or r.lease ~= ARGV[5] then return 0 end
redis.call('ZADD', leases, ARGV[6], r.id)
-- Claiming the entry for its own consumer resets its PEL idle time without
-- counting a delivery, so Redis tooling (XPENDING) sees it as fresh.
redis.call('XCLAIM', stream, group, r.consumer, 0, r.entry, 'JUSTID')
return 1
`)

// ackScript removes a delivered job. ARGV[4] job id, ARGV[5] lease token.
// Returns 1, or 0 when the lease is lost.
var ackScript = redis.NewScript(scriptPrelude + `
local r = load(ARGV[4])
if not r or r.lease == '' or r.lease ~= ARGV[5] then return 0 end
settle(r)
redis.call('HDEL', jobs, r.id)
return 1
`)

// failScript ends a delivery with an error: the job waits in the delayed
// set until its retry is due, or is dead-lettered after its last attempt.
// ARGV[4] job id, ARGV[5] lease token, ARGV[6] reason, ARGV[7] retry due
// (ms). Returns 0 retried, 1 dead, -1 lease lost.
var failScript = redis.NewScript(scriptPrelude + `
local r = load(ARGV[4])
if not r or r.lease == '' or r.lease ~= ARGV[5] then return -1 end
if r.attempt >= limit(r) then
  kill(r, ARGV[6])
  return 1
end
settle(r)
r.error, r.run_at = ARGV[6], tonumber(ARGV[7])
delay(r, ARGV[7])
save(r)
map(r)
return 0
`)

// recoverScript makes the jobs leased to a consumer due at once: their PEL
// entries stay with the consumer until the next Dequeue claims them, but
// their leases are void and expire now. ARGV[4] consumer. Returns how many.
var recoverScript = redis.NewScript(scriptPrelude + `
local n, start = 0, '-'
while true do
  local pending = redis.call('XPENDING', stream, group, start, '+', 100, ARGV[4])
  if #pending == 0 then break end
  for _, p in ipairs(pending) do
    local entry, r = p[1], nil
    local e = redis.call('XRANGE', stream, entry, entry)
    if #e > 0 then r = load(field(e[1][2], 'job') or '') end
    if not r or r.entry ~= entry then
      -- No job is delivered through this entry: drop it.
      redis.call('XACK', stream, group, entry)
      redis.call('XDEL', stream, entry)
    elseif r.lease ~= '' then
      r.lease, r.consumer = '', ''
      save(r)
      local s = redis.call('ZSCORE', leases, r.id)
      if not s or tonumber(s) > now then redis.call('ZADD', leases, now, r.id) end
      map(r)
      n = n + 1
    end
  end
  start = '(' .. pending[#pending][1]
end
return n
`)

// oldestScript returns when the job that has waited longest for a consumer
// became due, in unix ms, or -1 when none waits. Three places hold waiting
// jobs: the delayed set (due ones the promoter has not moved yet, by due
// time), the leases set (leases that ran out, by their end) and the stream
// after the group's last delivered entry (never delivered: by the record's
// run_at). The first of each is the oldest there.
var oldestScript = redis.NewScript(scriptPrelude + `
local oldest = -1
local function older(ms)
  if ms ~= nil and (oldest < 0 or ms < oldest) then oldest = ms end
end
for _, set in ipairs({delayed, leases}) do
  local first = redis.call('ZRANGE', set, '-inf', now, 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
  if #first > 0 then older(tonumber(first[2])) end
end
local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', stream)
if ok then
  for _, g in ipairs(groups) do
    if field(g, 'name') == group then
      local e = redis.call('XRANGE', stream, '(' .. field(g, 'last-delivered-id'), '+', 'COUNT', 1)
      if #e > 0 then
        local r = load(field(e[1][2], 'job'))
        if r then older(r.run_at) end
      end
    end
  end
end
return oldest
`)
