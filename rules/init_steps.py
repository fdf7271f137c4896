"""What an init step runs: the init container of a git or file step (opsched's init image), or the user's own.

A **git** step runs ``git clone`` of its URL (else its connection's repository) into ``<path>/<name>`` (``name``:
the connection's, else the repository's), then checks out its revision (else its connection's) if any; its flags
(else its connection's) go to ``git clone``, each split like a shell would. With a connection that has a Secret, the
Secret is mounted at ``GIT_CREDENTIALS`` in that container only (env ``OPSCHED_GIT_CREDENTIALS``), and git uses its keys: ``username`` and
``password`` (an HTTPS token: Kubernetes' basic-auth type) through a credential helper, or ``ssh-privatekey`` (the
ssh-auth type; ``known_hosts`` if present, else the host's key is accepted the first time). A **file** step writes
its content to ``<path>/<filename>`` and runs ``chmod`` with its mode. Every value a user wrote reaches the script
as an env var or an argument, never as shell text; the scripts are constants. Both run with no privilege escalation
and no capabilities, as the pod's user. A clone already there (the init container run again) is kept.
"""
from __future__ import annotations

import shlex

from opsched.proto.queues import Connection
from opsched.proto.spec import Container, EnvVar, InitStep

GIT_CREDENTIALS = "/etc/opsched/git"  # where a git step's connection Secret is mounted (that container only)
HOME = "/tmp"  # git writes its configuration there (any user may)


def hardened() -> dict:
    """The security context of opsched's init containers: no privilege escalation, no capability, the runtime's
    seccomp profile (what a ``restricted`` queue asks); the user is the pod's."""
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"}}


GIT_SCRIPT = """set -eu
if [ -d "$OPSCHED_GIT_DEST/.git" ]; then echo "opsched: $OPSCHED_GIT_DEST is cloned already"; exit 0; fi
creds="${OPSCHED_GIT_CREDENTIALS:-}"
mkdir -p "$HOME"
if [ -n "$creds" ] && [ -r "$creds/username" ] && [ -r "$creds/password" ]; then
  git config --global credential.helper '!f() { test "$1" = get && printf "username=%s\\npassword=%s\\n" \
"$(cat "$OPSCHED_GIT_CREDENTIALS/username")" "$(cat "$OPSCHED_GIT_CREDENTIALS/password")"; }; f'
fi
if [ -n "$creds" ] && [ -r "$creds/ssh-privatekey" ]; then
  mkdir -p "$HOME/.ssh" && cp "$creds/ssh-privatekey" "$HOME/.ssh/key" && chmod 600 "$HOME/.ssh/key"
  hosts="-o StrictHostKeyChecking=accept-new"
  if [ -r "$creds/known_hosts" ]; then hosts="-o UserKnownHostsFile=$creds/known_hosts"; fi
  export GIT_SSH_COMMAND="ssh -i $HOME/.ssh/key -o IdentitiesOnly=yes $hosts"
fi
git clone "$@" -- "$OPSCHED_GIT_URL" "$OPSCHED_GIT_DEST"
if [ -n "${OPSCHED_GIT_REVISION:-}" ]; then git -C "$OPSCHED_GIT_DEST" checkout --quiet "$OPSCHED_GIT_REVISION"; fi
"""
FILE_SCRIPT = """set -eu
mkdir -p "$(dirname "$OPSCHED_FILE_DEST")"
printf '%s' "$OPSCHED_FILE_CONTENT" > "$OPSCHED_FILE_DEST"
if [ -n "${OPSCHED_FILE_CHMOD:-}" ]; then chmod -- "$OPSCHED_FILE_CHMOD" "$OPSCHED_FILE_DEST"; fi
"""


def flags(values: list[str]) -> list[str]:
    """``git clone``'s arguments from Polyaxon's flags: each split like a shell would (``"--depth 1"``: two)."""
    return [arg for flag in values for arg in shlex.split(flag)]


def container_of(step: InitStep, index: int, image: str, connection: Connection | None) -> Container:
    """The init container of step ``index`` (its connection's declaration: what a git step clones by default)."""
    if step.container is not None:
        return step.container
    name = step.container_name(index)
    if step.file is not None:
        env = [EnvVar(name="OPSCHED_FILE_DEST", value=step.destination() or ""), EnvVar(name="OPSCHED_FILE_CONTENT", value=step.file.content)]
        env += [EnvVar(name="OPSCHED_FILE_CHMOD", value=step.file.chmod)] if step.file.chmod else []
        return Container(name=name, image=image, command=["sh", "-c", FILE_SCRIPT, "opsched-file"], env=env,
                         security_context=hardened())
    assert step.git is not None  # exactly one kind (``proto.spec_checks``)
    schema = connection.schema_ if connection is not None else None
    url = step.git.url or (schema.url if schema is not None else "")
    revision = step.git.revision or (schema.revision if schema is not None else None) or ""
    args = flags(step.git.flags or (schema.flags if schema is not None else []))
    env = [EnvVar(name="HOME", value=HOME), EnvVar(name="OPSCHED_GIT_URL", value=url),
           EnvVar(name="OPSCHED_GIT_DEST", value=step.destination() or "")]
    env += [EnvVar(name="OPSCHED_GIT_REVISION", value=revision)] if revision else []
    if connection is not None and connection.secret is not None:  # mounted there by ``rules.podspec``
        env.append(EnvVar(name="OPSCHED_GIT_CREDENTIALS", value=GIT_CREDENTIALS))
    return Container(name=name, image=image, command=["sh", "-c", GIT_SCRIPT, "opsched-git", *args], env=env,
                     security_context=hardened())
