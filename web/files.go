package web

// FileSources points the UI at journals, score reports and ablation results
// on disk.
type FileSources struct {
	RunsDir      string // journals (*.jsonl) as exported by the runtime
	ReportsDir   string // score reports (*.json) as written by loom-eval score --format json
	AblationsDir string // ablation results (*.json) as written by loom-eval ablate --format json
}

func (s *Server) registerFiles() {}
