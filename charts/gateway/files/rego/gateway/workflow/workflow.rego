# METADATA
# title: Workflow policy
# description: |
#   data.gateway.workflow.allow decides whether an agent may start a run of
#   a workflow (POST /workflows/{name}/runs). Input: {agent (the caller's
#   policy document), workflow: {name, callers}, input (the run's input)}.
#   Default: the agents listed in the workflow's callers.
#
#   data.gateway.workflow.signed_url_allowed decides whether a signed URL
#   that a step's answer carries in its data (a document passed by
#   reference) may go on to the next agents. Input: {agent (the node's
#   agent), workflow, node, url: {raw, host, path}}. Default: hosts in
#   signed_url_hosts, empty as shipped: add your buckets' hosts.
package gateway.workflow

# METADATA
# title: Allow
# description: true lets the agent start the run; anything else refuses it (403).
# entrypoint: true
default allow := false

allow if input.agent.id in input.workflow.callers

# The hosts whose signed URLs may pass between a workflow's agents, e.g.
# {"my-bucket.s3.eu-west-1.amazonaws.com", "storage.googleapis.com"}.
signed_url_hosts := set()

# METADATA
# title: Signed URL allowed
# description: true lets a signed URL in a step's data pass; anything else fails the step.
# entrypoint: true
default signed_url_allowed := false

signed_url_allowed if input.url.host in signed_url_hosts
