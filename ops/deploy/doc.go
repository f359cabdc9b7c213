// Package deploy holds seqd's deployment files, and the test that keeps
// them working: systemd units for the sequencer group's members
// (systemd/seqd-member@.service, one instance per member id), a replayer
// and a bridge; the host's one configuration file (seqd.toml); and a
// Kubernetes example (kubernetes/: a StatefulSet of three members with
// stable names and volumes, a headless Service, the ConfigMap for
// multicast with host networking or for the TCP transport).
//
// The test parses the units (ini-style) and the manifests (YAML), then
// starts the units' ExecStart command lines for real, with the paths and
// addresses moved to a temporary directory and free loopback ports: the
// three members elect a primary, the replayer comes up, and all of them
// stop cleanly on SIGTERM. docs/deploy.md is the walkthrough.
//
// It has no Go API; nothing here runs in a seqd process.
package deploy
