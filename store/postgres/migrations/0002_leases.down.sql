DROP TABLE leases;
