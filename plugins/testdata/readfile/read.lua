function on_request(request)
  if request.model == "io" then
    return {status = 400, message = io.open("/etc/passwd"):read("*a")}
  elseif request.model == "dofile" then
    dofile("/etc/passwd")
  elseif request.model == "os" then
    os.execute("true")
  end
  return nil
end
