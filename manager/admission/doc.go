// Package admission is what the manager cluster's API server asks before a
// manager Job is stored, and what the charts install around jobferry's
// rights: the opt-in (mutating) and validating webhooks and their
// configurations (webhook.go, webhookconfig.go), the dispatch policy they
// and the Job controller apply — opt-in namespaces, reserved namespaces,
// Pod Security (policy.go) — the webhook serving certificates (certs.go),
// and the ValidatingAdmissionPolicies the API servers evaluate themselves:
// jobferry's state on Jobs (statepolicy.go, manager chart) and the manager's
// rights on a worker's namespaces (namespacepolicy.go, worker chart).
package admission
