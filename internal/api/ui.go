package api

import "net/http"

// mountUI serves the web dashboard's embedded assets on mux.
func (s *Server) mountUI(mux *http.ServeMux) {}
