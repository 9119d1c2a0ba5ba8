// Package race says whether the binary was built with the race detector,
// whose instrumentation changes what escapes to the heap: the allocation
// tests (testing.AllocsPerRun) hold bounds for both builds. It imports
// nothing.
package race
