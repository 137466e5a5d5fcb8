-- Audit: one JSON line per finished request, appended by write_line to the
-- file the operator names with --plugin-lines FILE (plugins cannot open
-- files themselves; without the flag the line goes to the server log).
-- GET /plugins/audit/count shows how many requests were audited.

function on_complete(request, response, usage)
  kv.incr("count", 1)
  local key = ""
  if request.api_key ~= "" then
    key = string.sub(request.api_key, 1, 4) .. "..."
  end
  write_line(json.encode({
    time = time.now(),
    model = request.model,
    key = key,
    finish = response.finish_reason,
    calls = #response.tool_calls,
    prompt_tokens = usage.prompt_tokens,
    completion_tokens = usage.completion_tokens,
  }))
end

handlers = {
  ["GET /count"] = function(req)
    return tostring(kv.get("count") or 0)
  end,
}
