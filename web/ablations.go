package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"

	"github.com/loomwork/loomwork/retrieval/ablation/result"
)

// AblationItem is one ablation result file.
type AblationItem struct {
	File   string
	Report *result.Report
	Err    string
}

// AblationsView is the ablations list: the ablation results (those that do
// not read with their error) and the directory's other JSON files (such as
// the reranker model `loom-eval ablate --out` saves next to its result).
type AblationsView struct {
	Items  []AblationItem
	Others []OtherFile
}

func (s *Server) readAblation(name string) (*result.Report, error) {
	p, err := safeFile(s.deps.Files.AblationsDir, name, ".json")
	if err != nil {
		return nil, err
	}
	kind, readErr, err := sniffFile(p)
	if err != nil {
		return nil, err
	}
	if kind != kindAblation {
		return nil, badRequest{fmt.Sprintf("%s is %s, not an ablation result (write one with loom-eval ablate --format json)", name, describeKind(kind, readErr))}
	}
	return parseAblation(name, p)
}

// parseAblation reads the ablation result at path.
func parseAblation(name, path string) (*result.Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ablation %s: %w", name, err)
	}
	var rep result.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, badRequest{fmt.Sprintf("ablation %s: not a loom-eval ablate JSON result: %v", name, err)}
	}
	if len(rep.Rows) == 0 {
		return nil, badRequest{fmt.Sprintf("ablation %s: no result rows (write it with loom-eval ablate --format json)", name)}
	}
	return &rep, nil
}

func (s *Server) ablationList(w http.ResponseWriter, r *http.Request) {
	var v AblationsView
	err := scanDir(s.deps.Files.AblationsDir, func(name, path string, kind fileKind, readErr error) {
		if kind != kindAblation {
			v.Others = append(v.Others, otherFile(name, kind, readErr))
			return
		}
		rep, err := parseAblation(name, path)
		it := AblationItem{File: name, Report: rep}
		if err != nil {
			it.Err = err.Error()
		}
		v.Items = append(v.Items, it)
	}, ".json")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	render(w, r, AblationListPage(v))
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
