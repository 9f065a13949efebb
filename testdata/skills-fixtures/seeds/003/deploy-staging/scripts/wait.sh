kubectl rollout status deploy/app -n staging
