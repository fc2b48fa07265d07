DROP TABLE blobs;
