package stepdiff

// Pair is one line of an alignment: A and B index the two sequences, -1
// where the line has no element on that side (a gap).
type Pair struct{ A, B int }

// MaxCells bounds the alignment table Compare fills (one byte a cell): two
// runs of about 4,000 differing steps each. Longer runs are paired by
// position between their common start and end, and the Diff says so.
const MaxCells = 16 << 20

// Align aligns two sequences of lengths n and m: it returns, in order,
// every element of each exactly once, either paired with an element of
// the other or alone, choosing the pairs that maximise the sum of
// score(i, j) over them (a score of 0 or less may not pair). This is the
// weighted longest common subsequence, the edit distance's dual: one
// element inserted on one side costs one gap, not a misalignment of
// everything after it.
//
// It takes O(n·m) time and n·m bytes. When n·m exceeds maxCells it pairs
// by position instead (the first min(n, m) elements pairwise, the rest
// alone) and reports exact = false.
func Align(n, m int, score func(i, j int) int, maxCells int) (pairs []Pair, exact bool) {
	if n == 0 || m == 0 || n*m > maxCells {
		pairs = make([]Pair, 0, max(n, m))
		k := 0
		if n > 0 && m > 0 {
			k = min(n, m)
		}
		for i := 0; i < k; i++ {
			pairs = append(pairs, Pair{i, i})
		}
		for i := k; i < n; i++ {
			pairs = append(pairs, Pair{i, -1})
		}
		for j := k; j < m; j++ {
			pairs = append(pairs, Pair{-1, j})
		}
		return pairs, n == 0 || m == 0
	}
	// best[j] is the best score aligning a[:i] with b[:j], one row at a
	// time; move[i*m+j] records the last step of the best alignment of
	// a[:i+1] with b[:j+1].
	const (
		moveDiag = iota
		moveUp   // a[i] alone
		moveLeft // b[j] alone
	)
	prev := make([]int, m+1)
	cur := make([]int, m+1)
	move := make([]byte, n*m)
	for i := 0; i < n; i++ {
		cur[0] = 0
		for j := 0; j < m; j++ {
			// Ties go to the pair, then to a's element alone: one fixed
			// rule, so the same inputs always align the same way.
			best, mv := prev[j+1], byte(moveUp)
			if cur[j] > best {
				best, mv = cur[j], moveLeft
			}
			if s := score(i, j); s > 0 && prev[j]+s >= best {
				best, mv = prev[j]+s, moveDiag
			}
			cur[j+1] = best
			move[i*m+j] = mv
		}
		prev, cur = cur, prev
	}
	pairs = make([]Pair, 0, n+m)
	i, j := n-1, m-1
	for i >= 0 || j >= 0 {
		switch {
		case i < 0:
			pairs = append(pairs, Pair{-1, j})
			j--
		case j < 0:
			pairs = append(pairs, Pair{i, -1})
			i--
		default:
			switch move[i*m+j] {
			case moveDiag:
				pairs = append(pairs, Pair{i, j})
				i, j = i-1, j-1
			case moveUp:
				pairs = append(pairs, Pair{i, -1})
				i--
			default:
				pairs = append(pairs, Pair{-1, j})
				j--
			}
		}
	}
	for l, r := 0, len(pairs)-1; l < r; l, r = l+1, r-1 {
		pairs[l], pairs[r] = pairs[r], pairs[l]
	}
	return pairs, true
}
