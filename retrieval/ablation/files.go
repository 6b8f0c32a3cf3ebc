package ablation

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/loomwork/loomwork/retrieval"
)

// WriteFiles writes a report's files into dir (created if missing):
// report.json, report.md and the nDCG chart ndcg.svg, and reranker.json
// — the gold-fold reranker, which `ablate --reranker` scores — when the run
// trained one (a run scoring a saved reranker trains none). It returns the
// paths written, in that order.
func WriteFiles(dir string, rep *Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	var written []string
	write := func(name string, fn func(*os.File) error) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
		if err := fn(f); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", name, err)
		}
		written = append(written, filepath.Join(dir, name))
		return f.Close()
	}
	if err := write("report.json", func(f *os.File) error { return rep.WriteJSON(f) }); err != nil {
		return nil, err
	}
	if err := write("report.md", func(f *os.File) error { return rep.WriteMarkdown(f) }); err != nil {
		return nil, err
	}
	if err := write("ndcg.svg", func(f *os.File) error { return rep.WriteSVG(f) }); err != nil {
		return nil, err
	}
	if rep.Reranker != nil && rep.Reranker.GoldModel != nil {
		p := filepath.Join(dir, "reranker.json")
		if err := (*retrieval.LogisticModel)(rep.Reranker.GoldModel).Save(p); err != nil {
			return nil, err
		}
		written = append(written, p)
	}
	return written, nil
}
