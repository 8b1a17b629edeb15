#!/bin/sh
# fabric-health.sh: Slurm's HealthCheckProgram, fabric_check on this node
# alone (--slurm-health: its devices, ports, GIDs, loopback traffic and
# counters, --expect when FABRIC_EXPECT names a file; no peers, no launcher),
# and a link that went down since its last run (--flap-state: each port's
# link_downed kept in FLAP_STATE).
# It drains the node when it is at fault, with a reason naming the tool and
# the ports it checked ("ibverbs fabric_check [rxe0:1]: rxe0:1 port_state:
# port is down"), and resumes it when it passes again only if fabric_check
# drained it and this run checked every port of that scope again, never a
# "wide" drain (a fault only a run across nodes sees).  A node DOWN, FAIL,
# MAINT, ... or drained by anyone else (fabric_matrix, an admin, an earlier
# version's "ibverbs: ...") is left alone, and said so (docs/bringup.md,
# "Slurm drains").  On a node Slurm says runs a job (ALLOCATED, MIXED,
# COMPLETING: HealthCheckNodeState=ANY) the transport counters are not
# judged, the job's traffic being on the ports; the physical ones are.
# In slurm.conf:
#
#   HealthCheckProgram=/etc/slurm/fabric-health.sh
#   HealthCheckInterval=300
#
# slurmd runs it as root with SLURMD_NODENAME and nothing else in its
# environment: edit the paths below, or call this script from a wrapper that
# sets IBVLUA, FABRIC_CHECK, FABRIC_EXPECT and FLAP_STATE.  The node needs the
# one file ibvlua (the portable one: make portable), whose built-in tool
# fabric_check runs; FABRIC_CHECK may name a script instead (a copy of
# examples/fabric_check.lua, with lua5.4 as IBVLUA and the module installed).
# The exit status is fabric_check's: 0 healthy, 1 at fault, 2 the check could
# not be made.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
IBVLUA=${IBVLUA:-/usr/local/bin/ibvlua}            # make install PORTABLE=1, or a copy of it
FABRIC_CHECK=${FABRIC_CHECK:-fabric_check}         # the tool inside ibvlua, or a script's path
FLAP_STATE=${FLAP_STATE:-/run/fabric-health.flaps} # link_downed between runs
exec "$IBVLUA" "$FABRIC_CHECK" --slurm-health --drain --undrain-ok --flap-state "$FLAP_STATE" \
  ${FABRIC_EXPECT:+--expect "$FABRIC_EXPECT"}
