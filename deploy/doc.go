// Package deploy holds rlserver's deployment files: the Grafana dashboard,
// the Docker Compose file, the Kubernetes StatefulSet, the systemd unit
// and an example config file. It has no code; its tests check that the
// files parse and agree with the binary (metric names, flags).
package deploy
