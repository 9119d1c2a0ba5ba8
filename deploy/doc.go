// Package deploy holds no code: it is the home of the deployment files
// (regions/, prometheus.yml, the Helm chart in helm/tally; the repository
// root has Dockerfile and docker-compose.multi.yml) and of the tests that
// check them against the node's flags (the chart through helm template),
// since no Docker engine or Kubernetes cluster runs them here.
package deploy
