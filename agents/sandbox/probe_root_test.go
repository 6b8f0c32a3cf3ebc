package sandbox

import (
	"sync"
	"syscall"
	"testing"

	"github.com/loomwork/loomwork/internal/testtier"
)

// Runners started at once in one process each probe cgroup2 for
// cgroup.kill. They shared one probe folder ("probe-PID"), and one's
// removal made another find no cgroup.kill on a kernel that has it
// ("lacks cgroup.kill (kernel < 5.14)", seen once in make test with
// parallel sandbox tests).
func TestRootConcurrentCgroupDetectionsAllFindCgroupKill(t *testing.T) {
	testtier.Slow(t) // the host's cgroups
	needRoot(t)
	const workers, rounds, parent = 8, 200, "loomwork-sandbox-probe-test"
	l, err := detectCgroups(parent)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, b := range l.bases() {
			_ = syscall.Rmdir(b) // the empty parent folders the detections made
		}
	})
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				if _, err := detectCgroups(parent); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d concurrent detections failed, e.g. %v", len(errs), workers, errs[0])
	}
}
