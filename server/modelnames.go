package server

// Model names. A server answers to its ModelName and to Config.ModelAliases.
// When names are configured (a ModelName or aliases) and AnyModelName is
// off, the Anthropic Messages and OpenAI Responses APIs answer a request
// naming another model with a 404 in their error shape; a server with no
// configured name, or with AnyModelName, serves whatever name a request
// gives (agents such as Claude Code send their own model names).

// checkModel rejects a model name the server does not serve.
func (s *Server) checkModel(name string) *APIError {
	if name == "" || s.cfg.AnyModelName || (s.cfg.ModelName == "" && len(s.cfg.ModelAliases) == 0) {
		return nil
	}
	if name == s.modelName {
		return nil
	}
	for _, a := range s.cfg.ModelAliases {
		if name == a {
			return nil
		}
	}
	return &APIError{Status: 404, Type: "invalid_request_error", Param: "model", Code: "model_not_found",
		Message: "the model " + quote(name) + " does not exist; this server serves " + quote(s.modelName)}
}

// responseModel is the model name a response reports: the one the request
// asked for (an alias, or any name with AnyModelName), else the served id.
func (s *Server) responseModel(asked string) string {
	if asked != "" {
		return asked
	}
	return s.modelName
}
