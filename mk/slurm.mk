# Slurm 22.05 from Debian (slurmctld, slurmd, client tools). Idempotent: skipped when installed.
# Not slurm-wlm-emulator: a front-end build that is broken on Debian 12 and switches alternatives.
SLURM_PKGS := slurmctld slurmd slurm-client

.PHONY: slurm-deps
slurm-deps:
	@if dpkg-query -W -f='$${Status}\n' $(SLURM_PKGS) 2>/dev/null | grep -qv 'install ok installed' \
	    || [ $$(dpkg-query -W -f='$${Status}\n' $(SLURM_PKGS) 2>/dev/null | wc -l) -ne 3 ]; then \
	  echo "installing $(SLURM_PKGS)"; \
	  SUDO=$$( [ $$(id -u) -eq 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends $(SLURM_PKGS); \
	  $$SUDO systemctl disable --now slurmctld slurmd munge >/dev/null 2>&1 || true; \
	fi

TEST_DEPS += slurm-deps
