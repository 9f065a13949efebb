package storage

var RestartableHealth = restartableHealth
