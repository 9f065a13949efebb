#!/bin/sh
set -eu
shellcheck scripts/*.sh
