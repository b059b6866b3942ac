#!/usr/bin/env bash
# A single-node SLURM cluster on loopback, for tests/test_slurm.py and for trying
# profiles/slurm on one machine (Debian/Ubuntu, run as root).
#
#   scripts/slurm-local.sh up       # install (apt, if missing), start munged, slurmctld, slurmd; wait for idle
#   scripts/slurm-local.sh status   # daemons, node state; exit 0 only when the node is idle/allocated/mixed
#   scripts/slurm-local.sh down     # stop the daemons this script started (by pid file), remove the symlink
#
# Everything lives in $SLURM_DIR (default /tmp/hasfl-slurm): slurm.conf, state, spool,
# logs, pid files. /etc/slurm/slurm.conf becomes a symlink to $SLURM_DIR/slurm.conf,
# because the Snakemake SLURM jobstep plugin drops SLURM_CONF from the environment of
# its inner srun (the symlink is refused if /etc/slurm/slurm.conf is a real file).
# No accounting (no slurmdbd): Snakemake must poll with squeue, which needs
# MinJobAge >= 3 x --slurm-init-seconds-before-status-checks (MinJobAge is 300 here).
#
# Environment: SLURM_DIR (must be traversable by the user slurm), SLURM_WAIT_S (bound on every wait, default 60),
# SLURM_APT_TIMEOUT (bound on each apt-get call, default 300), SLURM_MEM_FRACTION
# (percent of the RealMemory reported by `slurmd -C`, default 90), SLURM_GPUS (generic GPUs the node declares,
# bound to /dev/null: a job asking for one is scheduled and finds no GPU; default 1, 0 declares none).
set -euo pipefail

SLURM_DIR=${SLURM_DIR:-/tmp/hasfl-slurm}
# tests/test_slurm.py submits `device: cuda` train jobs that ask for one
SLURM_GPUS=${SLURM_GPUS:-1}
WAIT_S=${SLURM_WAIT_S:-60}
APT_TIMEOUT=${SLURM_APT_TIMEOUT:-300}
MEM_FRACTION=${SLURM_MEM_FRACTION:-90}
MIN_JOB_AGE=300
ETC_CONF=/etc/slurm/slurm.conf
CONF=$SLURM_DIR/slurm.conf
LOG=$SLURM_DIR/log
PACKAGES=(slurm-wlm slurmctld slurmd slurm-client munge)

say() { echo "slurm-local: $*" >&2; }

DIE_LOGS=()   # the logs worth showing if the current step fails
STARTED=0     # set once `up` may have started a daemon: a failure then stops them again

die() {
    say "FAILED: $*"
    local f
    for f in "${DIE_LOGS[@]}"; do
        if [[ -s $f ]]; then
            echo "----- last lines of $f -----" >&2
            tail -n 25 "$f" >&2
        fi
    done
    if ((STARTED)); then
        STARTED=0
        cmd_down >&2 || true
    fi
    exit 1
}

# The pid in a pid file, if that process is alive and is the expected program.
live_pid() {  # live_pid <pidfile> <comm>
    local pid comm
    [[ -s $1 ]] || return 1
    pid=$(tr -dc '0-9' <"$1")
    [[ -n $pid ]] || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    [[ $comm == "$2" ]] || return 1
    echo "$pid"
}

# Wait (bounded) until a command succeeds.
wait_for() {  # wait_for <seconds> <command...>
    local limit=$1 start=$SECONDS
    shift
    until "$@" >/dev/null 2>&1; do
        ((SECONDS - start < limit)) || return 1
        sleep 0.5
    done
}

munge_works() { munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; }

node_state() { timeout 10 sinfo -h -N -n localhost -o %t 2>/dev/null | head -n 1 || true; }

node_ready() { [[ $(node_state) =~ ^(idle|mix|alloc)$ ]]; }

install_packages() {
    local missing=0 cmd
    for cmd in slurmctld slurmd sinfo sbatch squeue munged munge; do
        command -v "$cmd" >/dev/null 2>&1 || missing=1
    done
    ((missing)) || return 0
    command -v apt-get >/dev/null 2>&1 || die "SLURM/munge are not installed and apt-get is not available"
    say "installing ${PACKAGES[*]} (apt-get, at most ${APT_TIMEOUT}s per step)"
    DIE_LOGS=("$LOG/apt.log")
    export DEBIAN_FRONTEND=noninteractive
    timeout "$APT_TIMEOUT" apt-get update >"$LOG/apt.log" 2>&1 || die "apt-get update failed or timed out"
    timeout "$APT_TIMEOUT" apt-get install -y --no-install-recommends "${PACKAGES[@]}" >>"$LOG/apt.log" 2>&1 ||
        die "apt-get install ${PACKAGES[*]} failed or timed out"
    for cmd in slurmctld slurmd sinfo munged; do
        command -v "$cmd" >/dev/null 2>&1 || die "$cmd still missing after apt-get install"
    done
}

start_munge() {
    if munge_works; then
        say "munged already running (not started by this script; left alone)"
        return 0
    fi
    if [[ ! -s /etc/munge/munge.key ]]; then
        if command -v mungekey >/dev/null 2>&1; then
            mungekey --create --keyfile=/etc/munge/munge.key >/dev/null 2>&1 || die "mungekey failed"
        else
            dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
        fi
        chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
    fi
    DIE_LOGS=("$LOG/munged.out" "$SLURM_DIR/munge/munged.log")
    mkdir -p /run/munge "$SLURM_DIR/munge"
    chown munge:munge /run/munge "$SLURM_DIR/munge"
    chmod 755 /run/munge
    chmod 700 "$SLURM_DIR/munge"
    runuser -u munge -- /usr/sbin/munged --pid-file="$SLURM_DIR/munge/munged.pid" \
        --log-file="$SLURM_DIR/munge/munged.log" >"$LOG/munged.out" 2>&1 || die "munged did not start: $(cat "$LOG/munged.out")"
    wait_for "$WAIT_S" munge_works || die "munge does not answer after ${WAIT_S}s"
}

node_line() {
    # CPUs from nproc; the socket/core/thread layout of `slurmd -C` when it has the same
    # CPU count (slurmd rejects a layout bigger than the hardware), else CPUs only.
    local hw cpus mem layout=""
    cpus=$(nproc)
    hw=$(slurmd -C 2>/dev/null | grep '^NodeName=' | head -n 1) || true
    [[ -n $hw ]] || die "slurmd -C printed no NodeName line"
    mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$hw")
    [[ -n $mem ]] || die "no RealMemory in: $hw"
    mem=$((mem * MEM_FRACTION / 100))
    if [[ $(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$hw") == "$cpus" ]]; then
        layout=$(grep -o -E '(Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore)=[0-9]+' <<<"$hw" | tr '\n' ' ')
    fi
    local gres=""
    ((SLURM_GPUS > 0)) && gres="Gres=gpu:$SLURM_GPUS "
    echo "NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus ${layout}RealMemory=$mem ${gres}State=UNKNOWN"
}

write_conf() {
    local slurm_user=slurm node
    node=$(node_line) || die "could not describe the node (slurmd -C, nproc)"
    id -u slurm >/dev/null 2>&1 || slurm_user=root
    mkdir -p "$SLURM_DIR/state" "$SLURM_DIR/spool"
    chown "$slurm_user" "$SLURM_DIR/state" "$LOG"
    # gres.conf is read from slurm.conf's folder; a gpu gres needs a device file, and /dev/null binds none
    if ((SLURM_GPUS > 0)); then
        printf 'AutoDetect=off\nNodeName=localhost Name=gpu Count=%d File=/dev/null\n' "$SLURM_GPUS" >"$SLURM_DIR/gres.conf"
    else
        rm -f "$SLURM_DIR/gres.conf"
    fi
    cat >"$CONF" <<EOF
# Written by scripts/slurm-local.sh: single node on loopback, no accounting.
ClusterName=hasfl-local
$( ((SLURM_GPUS > 0)) && echo "GresTypes=gpu" || true)
SlurmctldHost=localhost
SlurmUser=$slurm_user
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$SLURM_DIR/state
SlurmdSpoolDir=$SLURM_DIR/spool
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/slurmd.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
# Finished jobs stay visible to squeue this long; Snakemake's squeue status polling
# needs MinJobAge >= 3 x --slurm-init-seconds-before-status-checks.
MinJobAge=$MIN_JOB_AGE
KillWait=10
Waittime=0
$node
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
}

check_etc_conf() {
    # Never replace a real SLURM configuration of the machine.
    if [[ -e $ETC_CONF || -L $ETC_CONF ]]; then
        if [[ ! -L $ETC_CONF ]]; then
            die "$ETC_CONF is a real file (a SLURM installation of this machine?); not replacing it"
        fi
        local target
        target=$(readlink "$ETC_CONF")
        if [[ $target != "$CONF" && -e $target ]]; then
            die "$ETC_CONF links to $target (another local cluster?); run its teardown first"
        fi
    fi
}

stop_pidfile() {  # stop_pidfile <pidfile> <comm>
    local pid
    if pid=$(live_pid "$1" "$2"); then
        kill -TERM "$pid" 2>/dev/null || true
        if ! wait_for "$WAIT_S" bash -c "! kill -0 $pid"; then
            say "$2 ($pid) ignored SIGTERM for ${WAIT_S}s; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            wait_for 10 bash -c "! kill -0 $pid" || say "$2 ($pid) is still alive"
        fi
        say "stopped $2 ($pid)"
    fi
    rm -f "$1"
}

cmd_down() {
    stop_pidfile "$SLURM_DIR/slurmd.pid" slurmd
    stop_pidfile "$SLURM_DIR/slurmctld.pid" slurmctld
    stop_pidfile "$SLURM_DIR/munge/munged.pid" munged
    if [[ -L $ETC_CONF && $(readlink "$ETC_CONF") == "$CONF" ]]; then
        rm -f "$ETC_CONF"
    fi
}

cmd_status() {
    local name pid rc=0
    for name in munged slurmctld slurmd; do
        local pidfile=$SLURM_DIR/$name.pid
        [[ $name == munged ]] && pidfile=$SLURM_DIR/munge/munged.pid
        if pid=$(live_pid "$pidfile" "$name"); then
            echo "$name: running (pid $pid)"
        else
            echo "$name: not running (no live pid in $pidfile)"
            [[ $name == munged ]] && munge_works && echo "  (a munged not started by this script answers)"
        fi
    done
    local state
    state=$(node_state)
    echo "node localhost: ${state:-unknown (sinfo gave no answer)}"
    if [[ $state =~ ^(idle|mix|alloc)$ ]]; then
        timeout 10 sinfo || true
    else
        rc=1
    fi
    return $rc
}

cmd_up() {
    if [[ $(id -u) != 0 ]]; then
        say "FAILED: must run as root (installs packages, starts munged/slurmd as root, writes $ETC_CONF)"
        exit 1
    fi
    mkdir -p "$SLURM_DIR" "$LOG"
    if live_pid "$SLURM_DIR/slurmctld.pid" slurmctld >/dev/null && live_pid "$SLURM_DIR/slurmd.pid" slurmd >/dev/null &&
        [[ -L $ETC_CONF ]] && node_ready; then
        say "already up ($CONF)"
        return 0
    fi
    cmd_down  # whatever a previous `up` left behind
    check_etc_conf
    install_packages
    STARTED=1
    start_munge
    rm -rf "$SLURM_DIR/state" "$SLURM_DIR/spool"
    : >"$LOG/slurmctld.log"
    : >"$LOG/slurmd.log"
    DIE_LOGS=("$LOG/slurmctld.log" "$LOG/slurmd.log")
    write_conf
    mkdir -p /etc/slurm
    ln -sfn "$CONF" "$ETC_CONF"
    export SLURM_CONF=$CONF
    /usr/sbin/slurmctld -f "$CONF" >>"$LOG/slurmctld.log" 2>&1 || die "slurmctld did not start"
    wait_for "$WAIT_S" live_pid "$SLURM_DIR/slurmctld.pid" slurmctld || die "slurmctld did not write its pid file"
    wait_for "$WAIT_S" timeout 5 scontrol ping || die "slurmctld does not answer scontrol ping after ${WAIT_S}s"
    /usr/sbin/slurmd -f "$CONF" -N localhost >>"$LOG/slurmd.log" 2>&1 || die "slurmd did not start"
    wait_for "$WAIT_S" live_pid "$SLURM_DIR/slurmd.pid" slurmd || die "slurmd did not write its pid file"
    if ! wait_for "$WAIT_S" node_ready; then
        die "node localhost is '$(node_state)', not idle, after ${WAIT_S}s"
    fi
    STARTED=0
    say "up: $(timeout 10 sinfo -h -o '%P %D %t %c CPUs %m MB') (conf $CONF)"
}

case ${1:-} in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
*)
    echo "usage: $0 up|down|status   (SLURM_DIR=${SLURM_DIR})" >&2
    exit 2
    ;;
esac
