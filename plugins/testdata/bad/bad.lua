-- Misbehaving handlers, chosen by the request's model.
function on_request(request)
  if request.model == "loop" then
    while true do end
  elseif request.model == "raise" then
    error("boom")
  elseif request.model == "wrong" then
    return 5
  elseif request.model == "deep" then
    local function f(n) return f(n + 1) + 1 end
    return f(1)
  elseif request.model == "big" then
    local t = {}
    for i = 1, 1e9 do t[i] = string.rep("x", 1000) .. i end
  end
  return nil
end
