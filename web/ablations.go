package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"

	"github.com/loomwork/loomwork/retrieval/ablation"
)

// AblationItem is one ablation result file.
type AblationItem struct {
	File   string
	Report *ablation.Report
	Err    string
}

func (s *Server) readAblation(name string) (*ablation.Report, error) {
	p, err := safeFile(s.deps.Files.AblationsDir, name, ".json")
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var rep ablation.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, badRequest{fmt.Sprintf("ablation %s: not a loom-eval ablate JSON result: %v", name, err)}
	}
	if len(rep.Rows) == 0 {
		return nil, badRequest{fmt.Sprintf("ablation %s: no result rows (write it with loom-eval ablate --format json)", name)}
	}
	return &rep, nil
}

func (s *Server) ablationList(w http.ResponseWriter, r *http.Request) {
	names, err := listFiles(s.deps.Files.AblationsDir, ".json")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var items []AblationItem
	for _, n := range names {
		rep, err := s.readAblation(n)
		it := AblationItem{File: n, Report: rep}
		if err != nil {
			it.Err = err.Error()
		}
		items = append(items, it)
	}
	render(w, r, AblationListPage(items))
}

func (s *Server) ablationPage(w http.ResponseWriter, r *http.Request) {
	rep, err := s.readAblation(r.PathValue("file"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	render(w, r, AblationPage(r.PathValue("file"), rep))
}

// ablationChart draws the result's chart (the same SVG `loom-eval ablate`
// writes).
func (s *Server) ablationChart(w http.ResponseWriter, r *http.Request) {
	rep, err := s.readAblation(r.PathValue("file"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	if err := rep.WriteSVG(w); err != nil {
		s.log.Error("ablation chart", "file", r.PathValue("file"), "err", err)
	}
}
