//go:build !race

package testtier

// raceDetector is whether this binary was built with -race.
const raceDetector = false
