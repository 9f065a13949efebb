// Package archtest holds tests of the module's package graph: which packages
// may import which. It has no code of its own.
package archtest
