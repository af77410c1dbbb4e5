#!/bin/bash
# Regenerates the SN640 profiles from zn540.toml (they share its hardware).
# usage: scripts/gen-sn640.sh profiles/zn540.toml profiles
src=$1; out=$2
for v in "sn640:0.07:7" "sn640-op7:0.07:7" "sn640-op28:0.28:28"; do
IFS=: read name op pct <<<"$v"
{
cat <<EOT
# Western Digital Ultrastar DC SN640: the block-interface (conventional namespace) twin of the
# ZN540 — the same flash and controller behind the NVM command set (seed 003 §Evaluation: one
# production platform exposed as a block-interface SSD with 7% or 28% over-provisioning, or as
# ZNS). A page-mapped FTL with greedy garbage collection hides ${pct}% of the raw flash from the host.
#
# KEEP IN SYNC: [geometry], [flash], [controller] and [host] are copied verbatim from
# profiles/zn540.toml; when zn540.toml changes, change sn640.toml, sn640-op7.toml and
# sn640-op28.toml alike (profile::tests::sn640_profiles_share_the_zn540_hardware checks it).
# The controller's zone command costs are unused by a conventional namespace.
name = "$name"
description = "WD Ultrastar DC SN640, conventional twin of the ZN540, ${pct}% over-provisioning"
namespace = "conventional"

[ftl]
over_provisioning = $op
gc_free_blocks = 2
gc_burst = 0.5

EOT
awk '/^\[geometry\]/{p=1} /^\[zns\]/{p=0} /^\[flash\]/{p=1} p' "$src"
} > "$out/$name.toml"; done
