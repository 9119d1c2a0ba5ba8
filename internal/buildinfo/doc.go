// Package buildinfo reports what binary is running: the module version and
// the VCS revision Go stamped into it, for --version and the
// tally_build_info metric.
package buildinfo
