// Command validate checks the Kubernetes objects that `helm template` renders
// from deploy/helm/agentgate, with no cluster and no network.
//
//	helm template agentgate deploy/helm/agentgate -f values.yaml >rendered.yaml
//	go -C deploy/helm/validate run . [-external Secret/name,...] ../../../rendered.yaml
//
// Each document is decoded strictly into the Kubernetes API's own Go types
// (k8s.io/api, and the Prometheus Operator's for ServiceMonitor): an unknown,
// duplicate, misspelt or mistyped field is an error, as with kubectl apply
// --validate=strict. Then each object is checked as the API server would for
// what the chart sets (names, labels, ports, env, probes, volumes, selectors),
// its pods against the "restricted" Pod Security Standard with the admission
// plugin's own checks (k8s.io/pod-security-admission), and every reference
// (Secret and ConfigMap keys, volumes, ports, selectors) against the other
// objects rendered, or the -external list of objects expected to exist in
// the cluster beside the release.
//
// kubeconform would need the Kubernetes JSON schemas, which are downloaded
// from the internet; these checks need none.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
