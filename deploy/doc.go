// Package deploy holds no code: it is the home of the deployment files
// (regions/, prometheus.yml; the repository root has Dockerfile and
// docker-compose.multi.yml) and of the test that checks them against the
// node's flags, since no Docker engine runs them here.
package deploy
