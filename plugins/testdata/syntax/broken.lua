function on_request(request
