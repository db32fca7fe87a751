# METADATA
# title: Workflow policy
# description: |
#   data.gateway.workflow.allow decides whether an agent may start a run of
#   a workflow (POST /workflows/{name}/runs). Input: {agent (the caller's
#   policy document), workflow: {name, callers}, input (the run's input)}.
#   Default: the agents listed in the workflow's callers.
package gateway.workflow

# METADATA
# title: Allow
# description: true lets the agent start the run; anything else refuses it (403).
# entrypoint: true
default allow := false

allow if input.agent.id in input.workflow.callers
