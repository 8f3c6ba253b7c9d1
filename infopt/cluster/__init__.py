"""Cluster serving (issue 34): the SLO boundary of one configuration (boundary), the queueing
model and capacity plan from it (queueing, capacity), and replicas behind real routers
(routers, replicas). Pure functions here; the flow's tasks run them against engines."""
