// Package campaign is idem's fault campaign (docs/reliability.md): a
// workload of random requests on every surface, sent by clients to
// service processes while faults strike them and their connections on a
// schedule drawn from a seed, recorded as a history that a checker holds
// against the contract's invariants.
//
// Run runs one campaign on one target; Serve is a service process, which
// the campaign's program becomes when EnvService is set; Check reads a
// history; Mutations are the known bugs that show the checker can fail.
// The proving ground's program proving/cmd/campaign, which
// scripts/campaign runs, is its command line.
package campaign
