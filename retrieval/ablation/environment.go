package ablation

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/loomwork/loomwork/retrieval"
	"github.com/loomwork/loomwork/retrieval/judged"
)

// LoadAverage is how busy the machine is now, for a report's "load"
// (latencies are wall clock): "load average A B C at start" from Linux's
// /proc/loadavg, or "unknown" elsewhere. Take it before the run starts.
func LoadAverage() string {
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			return "load average " + strings.Join(f[:3], " ") + " at start"
		}
	}
	return "unknown"
}

// Environment says where and on what an ablation ran, for
// Report.Environment: the machine, the Go toolchain, the load at start
// (LoadAverage), the corpus and its hash, the embedder (as the caller
// names it) and the service's index and dense-model build (info).
func Environment(load, embedder string, ds *judged.Dataset, corpus *retrieval.Corpus, info retrieval.BuildInfo) map[string]string {
	return map[string]string{
		"machine":   machineDescription(),
		"go":        runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		"load":      load,
		"corpus":    fmt.Sprintf("%d documents (%d doc sections, %d issues), sha256 %s…", corpus.Len(), corpus.Len()-len(ds.Issues), len(ds.Issues), corpus.Hash()[:12]),
		"embedder":  embedder,
		"bm25":      fmt.Sprintf("bleve v2.6.3, scoring model bm25, index %s in %s", map[bool]string{true: "built", false: "reused"}[info.IndexRebuilt], info.IndexTime.Round(time.Millisecond)),
		"dense fit": fmt.Sprintf("%s, embed corpus %s", info.EmbedderSummary(), info.EmbedTime.Round(time.Millisecond)),
	}
}

// machineDescription names the CPU and core count (Linux; elsewhere just
// the core count).
func machineDescription() string {
	model := ""
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	mem := ""
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "MemTotal:") {
				if kb, err := strconv.Atoi(strings.Fields(line)[1]); err == nil {
					mem = fmt.Sprintf(", %.0f GiB RAM", float64(kb)/(1<<20))
				}
			}
		}
	}
	if model == "" {
		model = "unknown CPU"
	}
	return fmt.Sprintf("%s, %d cores%s", model, runtime.NumCPU(), mem)
}
