// Package repotest holds tests of the repository as a whole: that it needs
// nothing beside it, and that the commands its README shows run as written.
package repotest
