package api

// auditRoutes serve the audit reports of package audit.
func (s *Server) auditRoutes() []route { return nil }
