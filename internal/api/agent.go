package api

// agentRoutes are the routes node agents call (join, heartbeat, samples,
// events, commands, logs) and the node listing built from them.
func (s *Server) agentRoutes() []route { return nil }
