#!/usr/bin/env bash
# Make a single-node SLURM cluster available for the SLURM tests (tests/test_slurm.py).
#
# Idempotent: every step checks first and does nothing when its result is already there.
#   1. slurm-wlm, slurmdbd, munge and mariadb-server from Debian, when missing;
#   2. the configuration in $SLURM_CONF_DIR: cluster $CLUSTER, one node (this machine's CPUs and memory,
#      as `slurmd -C` reports them, and $GPUS of gres `gpu` on placeholder devices: a GPU request
#      reaches the scheduler where there is no GPU), partitions `cpu` (default) and `gpu`, accounting
#      through slurmdbd with associations enforced (sacct: the Snakemake SLURM executor's default source
#      of job states and of a failed job's reasons, and what the tests check); a changed configuration
#      restarts the daemons;
#   3. munged, MariaDB (database $DB for user slurm), slurmdbd, slurmctld and slurmd, each started
#      directly (no systemd) when it does not answer; logs under $SLURM_LOG_DIR;
#   4. the account $ACCOUNT with the calling user in it, when missing.
# When the cluster cannot start here it prints "slurm: unavailable (<reason>)" and exits 0: the tests
# marked `slurm` then skip and say why.
set -uo pipefail

CLUSTER="${CLUSTER:-milebench}"
ACCOUNT="${ACCOUNT:-milebench}"
GPUS="${GPUS:-2}"
DB="${DB:-slurm_acct_db}"
SLURM_CONF_DIR="${SLURM_CONF_DIR:-/etc/slurm}"
SLURM_LOG_DIR="${SLURM_LOG_DIR:-/var/log/slurm}"
WAIT_S="${WAIT_S:-60}"
DB_PASSWORD_FILE="$SLURM_CONF_DIR/.db-password"
GPU_DIR=/var/lib/slurm/gpus

unavailable() {
    echo "slurm: unavailable ($1)"
    exit 0
}

step() { echo "slurm-setup: $*"; }

[ "$(id -u)" -eq 0 ] || unavailable "needs root to install and start the daemons"

wait_for() {
    # wait_for WHAT LOG COMMAND...: until COMMAND succeeds, at most $WAIT_S seconds.
    local what="$1" log="$2" waited=0
    shift 2
    until "$@" >/dev/null 2>&1; do
        [ "$waited" -ge "$WAIT_S" ] && unavailable "$what did not answer within ${WAIT_S}s, see $log"
        sleep 1
        waited=$((waited + 1))
    done
}

install_packages() {
    local missing=()
    command -v slurmctld >/dev/null || missing+=(slurmctld)
    command -v slurmd >/dev/null || missing+=(slurmd)
    command -v slurmdbd >/dev/null || missing+=(slurmdbd)
    command -v sbatch >/dev/null || missing+=(slurm-client)
    command -v munged >/dev/null || missing+=(munge)
    command -v mariadbd >/dev/null || missing+=(mariadb-server)
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null || unavailable "no apt-get to install ${missing[*]}"
    step "installing ${missing[*]}"
    apt-get update -qq || unavailable "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null ||
        unavailable "apt-get install ${missing[*]} failed"
}

write_if_changed() {
    # write_if_changed PATH MODE OWNER < content: 0 when the file changed, 1 when it was already so.
    local path="$1" mode="$2" owner="$3" new
    new="$(cat)"
    if [ -f "$path" ] && [ "$(cat "$path")" = "$new" ]; then return 1; fi
    printf '%s\n' "$new" >"$path"
    chmod "$mode" "$path"
    chown "$owner" "$path"
    step "wrote $path"
    return 0
}

CHANGED=0

configure() {
    local host node password
    host="$(hostname -s)"
    # The node as slurmd sees it (CPUs, sockets, cores, threads, memory), less its uptime line.
    node="$(slurmd -C 2>/dev/null | grep '^NodeName=')" || unavailable "slurmd -C cannot describe this node"
    mkdir -p "$SLURM_CONF_DIR" "$SLURM_LOG_DIR" "$GPU_DIR" /run/slurm /var/lib/slurm/slurm{ctld,d}
    chown slurm:slurm "$SLURM_LOG_DIR" /run/slurm /var/lib/slurm/slurmctld
    if [ ! -s "$DB_PASSWORD_FILE" ]; then
        head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$DB_PASSWORD_FILE"
        chmod 600 "$DB_PASSWORD_FILE"
    fi
    password="$(cat "$DB_PASSWORD_FILE")"
    write_if_changed "$SLURM_CONF_DIR/slurm.conf" 644 root:root <<EOF && CHANGED=1
# Written by .ci/slurm-setup.sh: a single-node cluster for the SLURM tests.
ClusterName=$CLUSTER
SlurmctldHost=$host
SlurmUser=slurm
AuthType=auth/munge
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=$SLURM_LOG_DIR/slurmctld.log
SlurmdLogFile=$SLURM_LOG_DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
GresTypes=gpu
ReturnToService=2
KillWait=5
OverTimeLimit=0
MinJobAge=600
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStorageEnforce=associations
AccountingStorageTRES=gres/gpu
# sacct shows the comment Snakemake gives each job: its rule and wildcards.
AccountingStoreFlags=job_comment
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
$node Gres=gpu:$GPUS State=UNKNOWN
PartitionName=cpu Nodes=$host Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$host MaxTime=INFINITE State=UP
EOF
    # slurmd drops a GPU gres without a File ("Removing file-less GPU"), so each GPU names a placeholder:
    # a character device like /dev/null (a plain file where mknod is refused: slurmd logs that it is
    # no device, and counts it). No autodetection: there is no GPU to find.
    local i files=()
    for ((i = 0; i < GPUS; i++)); do
        files+=("$GPU_DIR/gpu$i")
        [ -e "$GPU_DIR/gpu$i" ] || mknod "$GPU_DIR/gpu$i" c 1 3 2>/dev/null || touch "$GPU_DIR/gpu$i"
    done
    write_if_changed "$SLURM_CONF_DIR/gres.conf" 644 root:root <<EOF && CHANGED=1
AutoDetect=off
NodeName=$host Name=gpu File=$(IFS=,; echo "${files[*]}")
EOF
    write_if_changed "$SLURM_CONF_DIR/slurmdbd.conf" 600 slurm:slurm <<EOF && CHANGED=1
AuthType=auth/munge
DbdHost=localhost
SlurmUser=slurm
PidFile=/run/slurm/slurmdbd.pid
LogFile=$SLURM_LOG_DIR/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$password
StorageLoc=$DB
EOF
}

daemon_pid() {
    # daemon_pid NAME: the pid in /run/slurm/NAME.pid if that process is NAME (not a stale file's).
    local pid
    pid="$(cat "/run/slurm/$1.pid" 2>/dev/null)" || return 1
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ] && echo "$pid"
}

stop_daemon() {
    # stop_daemon NAME: end the daemon NAME, if it runs.
    local pid
    if pid="$(daemon_pid "$1")"; then
        step "stopping $1 (pid $pid): its configuration changed"
        kill "$pid"
        local waited=0
        while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt "$WAIT_S" ]; do
            sleep 1
            waited=$((waited + 1))
        done
    fi
    rm -f "/run/slurm/$1.pid"
}

munge_answers() { munge -n | unmunge; }

start_munge() {
    munge_answers >/dev/null 2>&1 && return 0
    [ -s /etc/munge/munge.key ] || { step "creating the munge key"; mungekey --create --force; }
    chown munge:munge /etc/munge/munge.key
    chmod 600 /etc/munge/munge.key
    mkdir -p /run/munge
    chown munge:munge /run/munge
    step "starting munged"
    runuser -u munge -- munged || unavailable "munged did not start, see /var/log/munge/munged.log"
    wait_for munged /var/log/munge/munged.log munge_answers
}

sql() { mariadb --protocol=socket -u root -e "$1"; }

start_database() {
    if ! mariadb-admin --protocol=socket -u root ping >/dev/null 2>&1; then
        mkdir -p /run/mysqld
        chown mysql:mysql /run/mysqld
        step "starting MariaDB (log: $SLURM_LOG_DIR/mariadb.log)"
        nohup mariadbd --user=mysql --bind-address=127.0.0.1 >>"$SLURM_LOG_DIR/mariadb.log" 2>&1 &
        wait_for MariaDB "$SLURM_LOG_DIR/mariadb.log" mariadb-admin --protocol=socket -u root ping
    fi
    local password
    password="$(cat "$DB_PASSWORD_FILE")"
    sql "CREATE DATABASE IF NOT EXISTS $DB;
         CREATE USER IF NOT EXISTS 'slurm'@'localhost';
         ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$password';
         GRANT ALL ON $DB.* TO 'slurm'@'localhost';" ||
        unavailable "cannot create database $DB and its user, see $SLURM_LOG_DIR/mariadb.log"
}

dbd_answers() { sacctmgr -n list cluster; }

start_slurmdbd() {
    dbd_answers >/dev/null 2>&1 && return 0
    step "starting slurmdbd (log: $SLURM_LOG_DIR/slurmdbd.log)"
    slurmdbd || unavailable "slurmdbd did not start, see $SLURM_LOG_DIR/slurmdbd.log"
    wait_for slurmdbd "$SLURM_LOG_DIR/slurmdbd.log" dbd_answers
}

start_slurmctld() {
    # The cluster is known to accounting before slurmctld registers with it.
    if [ -z "$(sacctmgr -n -P list cluster "$CLUSTER" format=Cluster)" ]; then
        step "adding cluster $CLUSTER to accounting"
        sacctmgr -i add cluster "$CLUSTER" >/dev/null || unavailable "sacctmgr add cluster $CLUSTER failed"
    fi
    scontrol ping 2>/dev/null | grep -q 'is UP' && return 0
    step "starting slurmctld (log: $SLURM_LOG_DIR/slurmctld.log)"
    slurmctld || unavailable "slurmctld did not start, see $SLURM_LOG_DIR/slurmctld.log"
    wait_for slurmctld "$SLURM_LOG_DIR/slurmctld.log" sh -c "scontrol ping | grep -q 'is UP'"
}

node_state() { sinfo -h -N -o '%T' | head -n 1; }

node_ready() { node_state | grep -qE '^(idle|mixed|allocated|completing)'; }

start_slurmd() {
    node_ready && return 0
    if ! daemon_pid slurmd >/dev/null; then
        step "starting slurmd (log: $SLURM_LOG_DIR/slurmd.log)"
        slurmd || unavailable "slurmd did not start, see $SLURM_LOG_DIR/slurmd.log"
    fi
    # A node drained under an earlier configuration (a gres it could not show) registers valid now.
    local waited=0
    until node_ready || node_state | grep -q '^drain' || [ "$waited" -ge "$WAIT_S" ]; do
        sleep 1
        waited=$((waited + 1))
    done
    if node_state | grep -q '^drain'; then
        step "resuming node $(hostname -s), drained: $(sinfo -h -N -o '%E' | head -n 1)"
        scontrol update nodename="$(hostname -s)" state=resume
    fi
    wait_for "the node" "$SLURM_LOG_DIR/slurmd.log" node_ready
}

add_account() {
    local user
    user="$(id -un)"
    if [ -z "$(sacctmgr -n -P list account "$ACCOUNT" format=Account)" ]; then
        step "adding account $ACCOUNT"
        sacctmgr -i add account "$ACCOUNT" cluster="$CLUSTER" >/dev/null ||
            unavailable "cannot add account $ACCOUNT"
    fi
    if [ -z "$(sacctmgr -n -P list association user="$user" account="$ACCOUNT" format=User)" ]; then
        step "adding user $user to account $ACCOUNT"
        sacctmgr -i add user "$user" account="$ACCOUNT" cluster="$CLUSTER" >/dev/null ||
            unavailable "cannot add user $user to account $ACCOUNT"
    fi
}

install_packages
configure
if [ "$CHANGED" -eq 1 ]; then
    stop_daemon slurmd
    stop_daemon slurmctld
    stop_daemon slurmdbd
fi
start_munge
start_database
start_slurmdbd
start_slurmctld
start_slurmd
add_account
node="$(sinfo -h -N -o '%c CPUs, %m MB, gres %G' | head -n 1)"
echo "slurm: available (cluster $CLUSTER, node $(hostname -s): $node;" \
    "partitions $(sinfo -h -o '%P' | paste -sd ' '); account $ACCOUNT)"
