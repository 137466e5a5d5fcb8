-- Per-API-key daily token quota: a key that used DAILY_TOKENS tokens today
-- (UTC) gets 429 until midnight. Usage is counted in on_complete from the
-- usage record; the counters live in kv, shared by every worker state.
-- GET /plugins/quota/usage shows the caller's usage today.

DAILY_TOKENS = 100000

-- Per-key overrides.
LIMITS = {
  ["demo-key"] = 2000,
}

local DAY = 86400

local function key_of(request)
  if request.api_key == nil or request.api_key == "" then
    return "anonymous"
  end
  return request.api_key
end

local function limit_of(k)
  return LIMITS[k] or DAILY_TOKENS
end

local function counter(k)
  return "used/" .. time.date() .. "/" .. k
end

function on_request(request)
  local k = key_of(request)
  local used = kv.get(counter(k)) or 0
  if used >= limit_of(k) then
    return {status = 429, message = string.format("daily token quota of %d exceeded (%d used); it resets at 00:00 UTC", limit_of(k), used)}
  end
  return nil
end

function on_complete(request, response, usage)
  kv.incr(counter(key_of(request)), usage.total_tokens, DAY)
end

handlers = {
  ["GET /usage"] = function(req)
    local k = req.api_key ~= "" and req.api_key or "anonymous"
    return {status = 200, body = {key_used = kv.get(counter(k)) or 0, limit = limit_of(k), day = time.date()}}
  end,
}
