package api

import "net/http"

// mountUI serves the web dashboard's embedded assets on mux.
func (s *Server) mountUI(mux *http.ServeMux) {}

// uiRoutes are the JSON routes only the dashboard needs (an overview).
func (s *Server) uiRoutes() []route { return nil }
