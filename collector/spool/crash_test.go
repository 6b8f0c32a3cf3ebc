package spool

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/testtier"
)

const (
	crashChildEnv = "LOOMWORK_SPOOL_CRASH_CHILD"
	crashRoundEnv = "LOOMWORK_SPOOL_CRASH_ROUND" // appenders of round r are 4r…4r+3
)

func crashOptions(dir string) Options {
	return Options{Dir: dir, SegmentBytes: 128 << 10, MaxBytes: 64 << 20,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
}

// crashChild is the process the crash test kills: four appenders print
// "A appender seq" once Append acknowledged a record, and a consumer
// prints "C appender seq" for each record of a batch once its Commit
// returned. It runs until killed.
func crashChild(dir string) {
	w, err := Open(context.Background(), crashOptions(dir))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	var out sync.Mutex
	say := func(s string) {
		out.Lock()
		os.Stdout.WriteString(s) // one write each: a line is whole or absent
		out.Unlock()
	}
	var round int
	fmt.Sscan(os.Getenv(crashRoundEnv), &round)
	for a := 4 * round; a < 4*round+4; a++ {
		go func() {
			rng := rand.New(rand.NewPCG(uint64(a), 1))
			for i := 0; ; i++ {
				b := fmt.Appendf(nil, "%d %d|", a, i)
				b = append(b, make([]byte, rng.IntN(20000))...)
				for {
					err := w.Append(context.Background(), b)
					if err == nil {
						break
					}
					if !errors.Is(err, ErrFull) {
						fmt.Fprintln(os.Stderr, "child append:", err)
						os.Exit(2)
					}
					time.Sleep(time.Millisecond)
				}
				say(fmt.Sprintf("A %d %d\n", a, i))
			}
		}()
	}
	for {
		recs, err := w.Read(context.Background(), 256<<10)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child read:", err)
			os.Exit(2)
		}
		// "P" announces the batch before its Commit: a kill can come
		// between the Commit and the "C" lines, and the parent then
		// looks at the checkpoint to know whether the batch is consumed.
		end := recs[len(recs)-1].End
		var pre, post strings.Builder
		for _, r := range recs {
			var a, i int
			fmt.Sscanf(string(r.Data), "%d %d|", &a, &i)
			fmt.Fprintf(&pre, "P %d %d %d %d\n", a, i, end.Segment, end.Offset)
			fmt.Fprintf(&post, "C %d %d\n", a, i)
		}
		say(pre.String())
		if err := w.Commit(end); err != nil {
			fmt.Fprintln(os.Stderr, "child commit:", err)
			os.Exit(2)
		}
		say(post.String())
	}
}

// TestKill9KeepsEveryAcknowledgedRecord runs a child process that appends
// and consumes, kills it with SIGKILL at a random moment, and reopens the
// spool: every acknowledged record was either committed (consumed) before
// the kill or is read back, exactly once, in per-appender order, and no
// committed record comes back.
func TestKill9KeepsEveryAcknowledgedRecord(t *testing.T) {
	testtier.Slow(t) // child processes killed with SIGKILL
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			dir := t.TempDir()
			rng := rand.New(rand.NewPCG(seed, 17))
			acked := map[[2]int]bool{}
			committed := map[[2]int]bool{}
			announced := map[[2]int]Position{}
			// Two crashes in a row on the same directory: the second
			// child starts from the first one's leftovers.
			for round := range 2 {
				cmd := exec.Command(exe, "-test.run=^$")
				cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, fmt.Sprint(crashRoundEnv, "=", round))
				cmd.Stderr = os.Stderr
				stdout, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				lines := make(chan string, 1024)
				go func() {
					sc := bufio.NewScanner(stdout)
					for sc.Scan() {
						lines <- sc.Text()
					}
					close(lines)
				}()
				// Kill once the child has acknowledged a random number
				// of records (so it is busy), after a random extra delay.
				target := 50 + rng.IntN(400)
				delay := time.Duration(rng.IntN(30)) * time.Millisecond
				var timer <-chan time.Time
				n := 0
				deadline := time.After(60 * time.Second)
			loop:
				for {
					select {
					case l, ok := <-lines:
						if !ok {
							break loop
						}
						var a, i int
						var kind string
						var end Position
						if _, err := fmt.Sscanf(l, "%s %d %d", &kind, &a, &i); err != nil {
							t.Fatalf("child line %q: %v", l, err)
						}
						if kind == "P" {
							fmt.Sscanf(l, "P %d %d %d %d", &a, &i, &end.Segment, &end.Offset)
							announced[[2]int{a, i}] = end
							continue
						}
						if kind == "A" {
							acked[[2]int{a, i}] = true
							n++
							if n == target {
								timer = time.After(delay)
							}
						} else {
							committed[[2]int{a, i}] = true
						}
					case <-timer:
						cmd.Process.Signal(syscall.SIGKILL)
						timer = nil
					case <-deadline:
						cmd.Process.Signal(syscall.SIGKILL)
						t.Fatalf("round %d: the child acknowledged only %d records in 60 s", round, n)
					}
				}
				err = cmd.Wait()
				if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
					t.Fatalf("round %d: the child ended without being killed: %v", round, err)
				}
				// A batch announced whose "C" lines the kill cut off is
				// consumed if its Commit reached the checkpoint.
				ckpt, _, err := readCheckpoint(dir)
				if err != nil {
					t.Fatal(err)
				}
				for k, end := range announced {
					if !committed[k] && !ckpt.less(end) {
						committed[k] = true
					}
				}
				clear(announced)
				t.Logf("round %d: killed after %d acknowledged records", round, n)
			}

			w := mustOpen(t, crashOptions(dir))
			replayed := map[[2]int]bool{}
			last := map[int]int{}
			for {
				recs, err := w.TryRead(1 << 20)
				if err != nil {
					t.Fatal(err)
				}
				if len(recs) == 0 {
					break
				}
				for _, r := range recs {
					var k [2]int
					if _, err := fmt.Sscanf(string(r.Data), "%d %d|", &k[0], &k[1]); err != nil {
						t.Fatalf("replayed record %q: %v", head(r.Data), err)
					}
					if replayed[k] {
						t.Errorf("record %v replayed twice", k)
					}
					if committed[k] {
						t.Errorf("record %v was committed before the kill and is replayed", k)
					}
					if p, ok := last[k[0]]; ok && k[1] <= p {
						t.Errorf("appender %d: record %d replayed after %d", k[0], k[1], p)
					}
					last[k[0]] = k[1]
					replayed[k] = true
				}
			}
			missing := 0
			for k := range acked {
				if !committed[k] && !replayed[k] {
					missing++
					if missing < 5 {
						t.Errorf("acknowledged record %v neither committed nor replayed", k)
					}
				}
			}
			if missing > 0 {
				t.Fatalf("%d acknowledged records lost", missing)
			}
			t.Logf("%d acknowledged, %d committed, %d replayed", len(acked), len(committed), len(replayed))
		})
	}
}
