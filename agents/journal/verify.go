package journal

import "fmt"

// VerifyChain checks that evs are one run's events 1..n, each hashing to its
// Hash and chained to its predecessor.
func VerifyChain(evs []Event) error {
	prev := ""
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			return fmt.Errorf("run %s: event %d has seq %d: %w", e.RunID, i+1, e.Seq, ErrSeqGap)
		}
		if e.Prev != prev {
			return fmt.Errorf("run %s seq %d: %w", e.RunID, e.Seq, ErrChainBroken)
		}
		h, err := computeHash(&e)
		if err != nil {
			return fmt.Errorf("run %s seq %d: %w", e.RunID, e.Seq, err)
		}
		if h != e.Hash {
			return fmt.Errorf("run %s seq %d: %w", e.RunID, e.Seq, ErrHashMismatch)
		}
		prev = e.Hash
	}
	return nil
}
