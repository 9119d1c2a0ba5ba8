// Package docs holds no code: its tests check the project's Markdown (the
// README, docs/, BENCHMARKS.md, the JavaScript client's README) as a
// renderer reads it, so a table that would show as literal text fails.
package docs
