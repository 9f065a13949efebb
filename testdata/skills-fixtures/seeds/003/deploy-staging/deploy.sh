#!/bin/sh
echo "deploying $(git rev-parse --short HEAD) to staging"
echo https://staging.example.com
